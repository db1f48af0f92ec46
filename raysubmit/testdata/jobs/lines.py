"""Print N numbered lines.

Usage: lines.py N [WIDTH [SECONDS]]: each line padded to WIDTH bytes, the
whole output spread over about SECONDS (in 100 bursts) so that a follower
reads it while the job runs.
"""
import sys
import time

n = int(sys.argv[1])
width = int(sys.argv[2]) if len(sys.argv) > 2 else 0
seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
burst = max(1, n // 100)
out = sys.stdout
for i in range(1, n + 1):
    line = f"line {i:07d}"
    if width > len(line) + 1:
        line = line + " " + "x" * (width - len(line) - 2)
    out.write(line + "\n")
    if seconds and i % burst == 0:
        out.flush()
        time.sleep(seconds / 100)
out.flush()
