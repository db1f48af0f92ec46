"""Print N numbered lines ("line 0" ...) and an unterminated last one ("line end").

The benchmark's log job (test/bench): whatever relays the job's log must
deliver every line once, the last one too.
"""

import sys

n = int(sys.argv[1])
write = sys.stdout.write
for i in range(n):
    write(f"line {i}\n")
write("line end")
