#!/usr/bin/env python3
"""Where a test run's time and heads went: the tables of `make test`, .ci/run and the profile.

    report.py [--out DIR] [--go GO.json]... [--junit PYTEST.xml]... [--events EVENTS]
              [--slowest N] [--names] [--phases PHASES] [--budget SECONDS]
    go test -json ... | report.py --stream GO.json

--out DIR reads DIR/go*.json (`go test -json`, one file per go test run), DIR/pytest.xml (pytest's JUnit XML) and
DIR/events (the lines test/suite's counting ray and test/cluster append: one per Ray head and
per control plane). The report gives wall time per Go package and for pytest, the N slowest
tests, the Ray heads and control planes each started, and one line `head starts: N`; --names
lists every test that ran, with its result, so a reader can check that nothing was dropped.
Its last lines name the packages that failed and, for each failed test, the last lines it printed
(its t.Error and t.Log, or pytest's failure): the tail of a CI log is often all a reader gets.
--phases takes `name<TAB>seconds` lines (.ci/run's) and prints them first; with --budget, a
run whose phases took longer says so and names the slowest packages.

--stream copies `go test -json` from stdin to a file and prints a readable log: a line per
package, and the whole output of a package that failed. It exits 1 if a package failed.

Standard library only: it runs before, and without, the project's virtualenv.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

MODULE = "github.com/raystep/raystep"


@dataclass
class Unit:
    """A Go package or pytest: its wall time, result and what it started."""

    name: str
    seconds: float = 0.0
    result: str = "?"
    heads: int = 0
    planes: int = 0
    tests: dict[str, tuple[str, float]] = field(default_factory=dict)
    # running is what go test's timeout panic listed as still running:
    # "TestName (29m59s)", one per test.
    running: list[str] = field(default_factory=list)
    # said is what each test printed (t.Log, t.Error, go's own lines), its
    # last SAID lines, for the report's last lines when it failed.
    said: dict[str, collections.deque[str]] = field(default_factory=dict)


# SAID is how many of a failed test's last lines the report prints: the
# tail of a CI log is often all that is kept of it.
SAID = 12


def read_go(path: str, units: dict[str, Unit]) -> float:
    """Read go test -json events into units; return the wall time from first to last event."""
    first = last = ""
    # timed_out: per package, None until its timeout panic, then the
    # running tests it lists.
    timed_out: dict[str, list[str] | None] = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if ev.get("Time"):
                first, last = first or ev["Time"], ev["Time"]
            action, pkg, test = ev.get("Action"), ev.get("Package"), ev.get("Test")
            if action == "output" and pkg:
                text = ev.get("Output", "")
                timed_out[pkg] = read_timeout(text, timed_out.get(pkg))
                if test and text.strip() and not text.startswith(("=== ", "--- ")):
                    unit = units.setdefault(pkg, Unit(pkg))
                    unit.said.setdefault(test, collections.deque(maxlen=SAID)).append(
                        text.rstrip()
                    )
                continue
            if action not in ("pass", "fail", "skip") or not pkg:
                continue
            unit = units.setdefault(pkg, Unit(pkg))
            if test is None:
                unit.running = timed_out.get(pkg) or []
                unit.seconds, unit.result = float(ev.get("Elapsed") or 0), action
            else:
                unit.tests[test] = (action, float(ev.get("Elapsed") or 0))
    return seconds_between(first, last)


def read_timeout(line: str, running: list[str] | None) -> list[str] | None:
    """Follow go test's timeout panic through a package's output lines.

    It reads "panic: test timed out after 30m0s", "\trunning tests:", then
    one "\t\tTestName (29m59s)" per test; running is None until the panic.
    """
    if line.startswith("panic: test timed out"):
        return []
    if running is not None and line.startswith("\t\t") and "(" in line:
        running.append(line.strip())
    return running


def seconds_between(a: str, b: str) -> float:
    """Seconds from RFC 3339 time a to b (go test -json's, nanoseconds cut to micro)."""
    if not a or not b:
        return 0.0
    parse = lambda t: datetime.datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", t))
    return (parse(b) - parse(a)).total_seconds()


def read_junit(path: str, units: dict[str, Unit]) -> None:
    unit = units.setdefault("pytest", Unit("pytest"))
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    failed = False
    for suite in suites:
        unit.seconds += float(suite.get("time") or 0)
        for case in suite.iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            result = "pass"
            for tag in ("failure", "error"):
                why = case.find(tag)
                if why is not None:
                    result, failed = "fail", True
                    text = (why.get("message") or "") + "\n" + (why.text or "")
                    lines = [
                        line.rstrip() for line in text.splitlines() if line.strip()
                    ]
                    unit.said[name] = collections.deque(lines, maxlen=SAID)
            if case.find("skipped") is not None:
                result = "skip"
            unit.tests[name] = (result, float(case.get("time") or 0))
    unit.result = "fail" if failed else "pass"


def owner(who: str, root: str) -> str:
    """The unit a head belongs to: a Go package from its test binary's directory, or pytest."""
    if who.startswith("go:"):
        rel = os.path.relpath(who[3:], root) if root else who[3:]
        return MODULE if rel == "." else f"{MODULE}/{rel}"
    if who.startswith("pytest"):
        return "pytest"
    return who or "other"


def read_events(
    path: str, units: dict[str, Unit], root: str
) -> collections.Counter[str]:
    """Counts heads and control planes per unit; returns heads per pytest test."""
    per_test: collections.Counter[str] = collections.Counter()
    if not os.path.exists(path):
        return per_test
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            kind, who = parts[1], parts[2]
            unit = units.setdefault(owner(who, root), Unit(owner(who, root)))
            if kind == "ray-head":
                unit.heads += 1
                if who.startswith("pytest:"):
                    per_test[who[len("pytest:") :]] += 1
            elif kind == "control-plane":
                unit.planes += 1
    return per_test


def short(name: str) -> str:
    return name.removeprefix(MODULE + "/").removeprefix(MODULE)


def table(rows: list[list[str]], head: list[str]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    return "\n".join(
        [
            fmt(head),
            "|" + "|".join("-" * (w + 2) for w in widths) + "|",
            *map(fmt, rows),
        ]
    )


def stream(path: str) -> int:
    """Copy go test -json from stdin to path; print a line per package and failed packages' output."""
    out: dict[str, list[str]] = collections.defaultdict(list)
    tests: collections.Counter[str] = collections.Counter()
    failed = False
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as record:
        for line in sys.stdin:
            record.write(line)
            record.flush()
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                sys.stdout.write(line)  # go's own messages
                continue
            action, pkg = (
                ev.get("Action"),
                ev.get("Package") or ev.get("ImportPath", ""),
            )
            if action == "build-output":
                sys.stdout.write(ev.get("Output", ""))
            elif action == "output":
                out[pkg].append(ev.get("Output", ""))
                if len(out[pkg]) > 50_000:
                    del out[pkg][:10_000]
                    out[pkg].insert(0, "[... earlier output cut ...]\n")
            elif action in ("pass", "fail", "skip") and ev.get("Test"):
                tests[pkg] += 1
            elif action in ("pass", "fail", "skip"):
                elapsed = float(ev.get("Elapsed") or 0)
                if action == "fail":
                    failed = True
                    sys.stdout.write("".join(out[pkg]))
                    print(f"FAIL  {short(pkg) or pkg}  {elapsed:.1f}s", flush=True)
                elif tests[pkg] or action == "pass":
                    print(
                        f"{'ok' if action == 'pass' else 'skip':4}  {short(pkg)}  {elapsed:.1f}s  ({tests[pkg]} tests)",
                        flush=True,
                    )
                out.pop(pkg, None)
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--out", default="")
    ap.add_argument("--go", action="append", default=[])
    ap.add_argument("--junit", action="append", default=[])
    ap.add_argument("--events", default="")
    ap.add_argument("--phases", default="")
    ap.add_argument("--budget", type=float, default=0)
    ap.add_argument("--slowest", type=int, default=30)
    ap.add_argument(
        "--module-root",
        default=os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")),
    )
    ap.add_argument("--names", action="store_true")
    ap.add_argument("--stream", default="")
    args = ap.parse_args()
    if args.stream:
        return stream(args.stream)
    if args.out:
        args.go.extend(sorted(glob.glob(os.path.join(args.out, "go*.json"))))
        args.junit.append(os.path.join(args.out, "pytest.xml"))
        args.events = args.events or os.path.join(args.out, "events")

    units: dict[str, Unit] = {}
    walls: dict[str, float] = {}
    for p in args.go:
        if os.path.exists(p):
            # go.json, or go-NAME.json for each go test run of `make test`
            run = os.path.basename(p).removesuffix(".json").removeprefix("go")
            walls[f"go test ({run.lstrip('-') or 'all packages'})"] = read_go(p, units)
    for p in args.junit:
        if os.path.exists(p):
            read_junit(p, units)
            walls["pytest"] = units["pytest"].seconds
    per_test = (
        read_events(args.events, units, args.module_root)
        if args.events
        else collections.Counter()
    )
    ordered = sorted(units.values(), key=lambda u: -u.seconds)
    if args.names:
        print_names(units)
    if args.phases:
        total = print_phases(args.phases, walls)
    else:
        print_packages(ordered)
        slowest_tests(units, per_test, args.slowest)
        total = 0.0
    print(f"head starts: {sum(u.heads for u in units.values())}")
    print(f"control planes: {sum(u.planes for u in units.values())}")
    if args.budget and total > args.budget:
        slow = ", ".join(f"{short(u.name)} {u.seconds:.0f} s" for u in ordered[:4])
        print(
            f"WARNING: this run took {total / 60:.1f} minutes, over the "
            f"{args.budget / 60:.0f} it may take; the slowest: {slow}"
        )
    failed = [u for u in units.values() if u.result == "fail"]
    if failed:
        print("failed: " + ", ".join(short(u.name) or u.name for u in failed))
    for u in failed:
        if u.running:
            print(
                f"  {short(u.name) or u.name}: timed out while running {', '.join(u.running)}"
            )
        names = [
            name
            for name, (result, _) in u.tests.items()
            if result == "fail" and "/" not in name
        ]
        if names:
            print(f"  {short(u.name) or u.name}: {', '.join(sorted(names))} failed")
        print_said(u)
    return 0


def print_said(u: Unit) -> None:
    """Print the last lines of each failed test with no failed subtest: why it failed."""
    failed = [name for name, (result, _) in u.tests.items() if result == "fail"]
    for name in sorted(failed):
        if any(other.startswith(name + "/") for other in failed) or not u.said.get(
            name
        ):
            continue
        print(f"  {name} said, at its end:")
        for line in u.said[name]:
            print("    " + line.strip()[:300])


def print_phases(path: str, walls: dict[str, float]) -> float:
    """Print .ci/run's phases, then the test commands' own walls; return the total."""
    phases = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            phases = [line.rstrip("\n").split("\t") for line in f if "\t" in line]
    total = sum(float(s) for _, s in phases)
    rows = [[n, f"{float(s):.0f} s"] for n, s in phases] + [["(all)", f"{total:.0f} s"]]
    rows += [[f"  of the tests: {n}", f"{s:.0f} s"] for n, s in walls.items()]
    print("Phases of this run:\n")
    print(table(rows, ["phase", "wall"]))
    if "pytest" in walls and len(walls) > 1:
        print("(go test's two runs follow each other; pytest runs beside them)")
    print()
    return total


def print_packages(ordered: list[Unit]) -> None:
    rows = [
        [
            short(u.name) or u.name,
            f"{u.seconds:.1f}",
            u.result,
            str(len(u.tests)),
            str(u.heads),
            str(u.planes),
        ]
        for u in ordered
        if u.seconds or u.heads or u.planes or u.tests
    ]
    rows.append(
        [
            "(all)",
            "",
            "",
            str(sum(len(u.tests) for u in ordered)),
            str(sum(u.heads for u in ordered)),
            str(sum(u.planes for u in ordered)),
        ]
    )
    print(
        "Per package (wall time as go test and pytest report it; go test runs two at a time):\n"
    )
    print(
        table(
            rows,
            ["package", "wall s", "result", "tests", "ray heads", "control planes"],
        )
    )
    print()


def print_names(units: dict[str, Unit]) -> None:
    """Every test that ran, with its result and time: a reader checks that nothing was dropped."""
    n = sum(len(u.tests) for u in units.values())
    print(f"Every test that ran ({n}, subtests included):")
    for u in sorted(units.values(), key=lambda u: u.name):
        for name, (result, secs) in sorted(u.tests.items()):
            print(f"  {result:4} {secs:8.2f}s  {short(u.name) or u.name}  {name}")
    print()


def slowest_tests(
    units: dict[str, Unit], per_test: collections.Counter[str], n: int
) -> None:
    tests = []
    for u in units.values():
        for name, (result, secs) in u.tests.items():
            if u.name != "pytest" and "/" in name:
                continue  # subtests are inside their parent's time
            label = name if u.name == "pytest" else f"{short(u.name)}.{name}"
            heads = str(per_test.get(name, "")) if u.name == "pytest" else ""
            tests.append((secs, label, result, heads))
    tests.sort(reverse=True)
    print(
        f"The {n} slowest tests (Go: top-level tests; pytest: with the heads each started):\n"
    )
    print(
        table(
            [[f"{s:.1f}", n_, r, h] for s, n_, r, h in tests[:n]],
            ["s", "test", "result", "heads"],
        )
    )
    print()


if __name__ == "__main__":
    sys.exit(main())
