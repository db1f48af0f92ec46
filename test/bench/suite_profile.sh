#!/usr/bin/env bash
# Where the test suite's time goes, and what it starts: runs `make test`
# with its records in OUT (default out/profile) and prints, from them,
# wall time per Go package and for pytest, the 30 slowest tests, and the
# Ray heads and Kubernetes control planes each package started (every
# `ray start --head` goes through test/suite's counting ray), then every
# test's name and result. The tables are also kept in OUT/report.md.
#
#   test/bench/suite_profile.sh [OUT]
#
# The records of an earlier run print again with
# `python3 test/suite/report.py --out OUT`. Run it on a quiet machine:
# the figures are wall times.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/profile}
mkdir -p "$(dirname "$out")"
start=$SECONDS
make --no-print-directory test TEST_OUT="$out" >"$out.log" 2>&1
rc=$?
echo "make test: exit $rc in $((SECONDS - start)) s (its output: $out.log)"
python3 test/suite/report.py --out "$out" --slowest 30 --names | tee "$out/report.md"
exit "$rc"
