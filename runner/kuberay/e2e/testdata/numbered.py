"""A Ray driver for the port-forward tests: prints `numbered NNNN` for
1..2*HALF, waiting for the file GATE to exist after the first HALF lines
and for the file END after the last, so that the test decides when the
job goes on (it cuts the port-forward in between) and when it ends."""

import os
import sys
import time


def wait(path):
    while not os.path.exists(path):
        time.sleep(0.05)


half, gate, end = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for i in range(1, half + 1):
    print(f"numbered {i:04d}", flush=True)
wait(gate)
for i in range(half + 1, 2 * half + 1):
    print(f"numbered {i:04d}", flush=True)
wait(end)
