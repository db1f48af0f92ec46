"""Print N numbered lines (argv[1]), each padded to argv[2] bytes if given."""
import sys

n = int(sys.argv[1])
width = int(sys.argv[2]) if len(sys.argv) > 2 else 0
out = sys.stdout
for i in range(1, n + 1):
    line = f"line {i:07d}"
    if width > len(line) + 1:
        line = line + " " + "x" * (width - len(line) - 2)
    out.write(line + "\n")
out.flush()
