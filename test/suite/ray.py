#!/usr/bin/env python3
"""ray, counted: stands in front of the real ray for the test suite.

test/suite writes a copy of this file as `ray` in a directory of its own, with the
real ray's interpreter as its #! line (so raystep takes the same Python and PATH
from it as from the real ray) and REAL and EVENTS filled in. Every
`ray start --head`, whoever runs it (rayhead, the raystep binary, a Python
test, a script), appends one line to EVENTS: the time, "ray-head", who started
it and the arguments. Then the copy becomes the real ray. Nothing here depends
on the environment, which some tests build from scratch.

"who" is $RAYSTEP_SUITE_WHO when set (the suite's own heads), pytest:<node id> under a pytest test, else go:<package dir> of the
nearest ancestor that is a Go test binary, else "other".
"""

import os
import sys
import time

REAL = "@REAL@"
EVENTS = "@EVENTS@"


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _who() -> str:
    if os.environ.get("RAYSTEP_SUITE_WHO"):
        return os.environ["RAYSTEP_SUITE_WHO"]
    test = os.environ.get("PYTEST_CURRENT_TEST")
    if test:
        return "pytest:" + test.split(" ")[0]
    pid = os.getppid()
    while pid > 1:
        try:
            exe = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
            if exe.endswith(".test"):
                return "go:" + os.readlink(f"/proc/{pid}/cwd")
            pid = _parent(pid)
        except OSError:
            break
    return "other"


args = sys.argv[1:]
if "start" in args and "--head" in args:
    try:
        with open(EVENTS, "a") as f:
            f.write(f"{time.time():.3f}\tray-head\t{_who()}\t{' '.join(args)}\n")
    except OSError as e:
        print(
            f"ray (counted): cannot count this head in {EVENTS}: {e}", file=sys.stderr
        )
os.execv(REAL, [REAL, *args])
