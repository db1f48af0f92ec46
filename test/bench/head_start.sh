#!/usr/bin/env bash
# What one private Ray head's start costs this machine, alone and with
# others starting at the same moment: the figures behind rayhead's default
# of one start at a time per two CPUs (RAYSTEP_HEAD_STARTS).
#
#   make venv && test/bench/head_start.sh [MAX_AT_ONCE] [RUNS]
#
# For 1..MAX_AT_ONCE heads started together (default 2), RUNS times each
# (default 2), it prints the slowest head's wall time until `ray start`
# returned, the whole machine's busy CPU-seconds meanwhile (from
# /proc/stat, so run it on a quiet machine), and how many starts failed.
# Every head is stopped and its temp dir removed before the next round.
set -euo pipefail
cd "$(dirname "$0")/../.."
ray=${RAYSTEP_RAY_BIN:-$PWD/.venv/bin/ray}
max=${1:-2}
runs=${2:-2}
[ -x "$ray" ] || { echo "head_start.sh: no ray at $ray (make venv)" >&2; exit 2; }

dirs=()
cleanup() {
	for d in "${dirs[@]}"; do
		# Each head's processes carry its temp dir in their command line.
		pkill -KILL -f -- "--temp-dir=$d" 2>/dev/null || true
		pkill -KILL -f -- "$d/session" 2>/dev/null || true
		rm -rf "$d" "$d.out"
	done
	dirs=()
}
trap cleanup EXIT

# freeport prints a port that was free on 127.0.0.1 a moment ago: heads
# started together must not meet on Ray's fixed defaults (10001, 52365, and
# the dashboard's metrics server's 44227, set through DASHBOARD_METRIC_PORT).
freeport() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
hz=$(getconf CLK_TCK)

printf '%-9s %-4s %-14s %-15s %s\n' "at once" run "slowest wall" "busy CPU-s" "failed"
for n in $(seq 1 "$max"); do
	for r in $(seq 1 "$runs"); do
		b0=$(busy)
		t0=$(date +%s.%N)
		pids=()
		for _ in $(seq 1 "$n"); do
			d=$(mktemp -d /tmp/rhb.XXXXXX)
			dirs+=("$d")
			RAY_USAGE_STATS_ENABLED=0 DASHBOARD_METRIC_PORT="$(freeport)" "$ray" start --head --port=0 --node-ip-address=127.0.0.1 \
				--include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port=0 \
				--ray-client-server-port="$(freeport)" --dashboard-agent-listen-port=0 \
				--temp-dir="$d" >"$d.out" 2>&1 &
			pids+=($!)
		done
		failed=0
		for i in "${!pids[@]}"; do
			if ! wait "${pids[$i]}"; then
				failed=$((failed + 1))
				echo "a start failed; its output:" >&2
				tail -n 3 "${dirs[${#dirs[@]} - n + i]}.out" >&2
			fi
		done
		t1=$(date +%s.%N)
		b1=$(busy)
		printf '%-9s %-4s %-14s %-15s %s\n' "$n" "$r" "$(echo "$t1 - $t0" | bc | cut -c1-5) s" \
			"$(echo "($b1 - $b0) / $hz" | bc -l | cut -c1-5)" "$failed"
		cleanup
	done
done
