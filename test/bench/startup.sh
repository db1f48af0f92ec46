#!/usr/bin/env bash
# startup.sh [BASE_REF]: builds raystep with `make build` and prints the
# whole-process start-up table of test/bench/startup (N runs, default 30)
# for validate, schema and version. With BASE_REF (a commit, e.g. the one
# before a change) it also builds that commit from `git archive` in a
# temporary directory and measures it as "before", alternating with the
# current tree's "after". "floor" is test/bench/startup/linkfloor, a
# program that only links the packages whose init every raystep start
# pays: no command can start faster than it.
set -euo pipefail
cd "$(dirname "$0")/../.."
make --no-print-directory build >/dev/null
tmpfloor=$(mktemp -d)
trap 'rm -rf "$tmpfloor"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$tmpfloor/linkfloor" ./test/bench/startup/linkfloor
args=(-bin "floor=$tmpfloor/linkfloor" -bin "after=bin/raystep")
if [[ $# -gt 0 ]]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp" "$tmpfloor"' EXIT
	git archive "$1" | tar -x -C "$tmp"
	make --no-print-directory -C "$tmp" build BIN="$tmp/bin" VERSION="$1" >/dev/null
	args=(-bin "before=$tmp/bin/raystep" "${args[@]}")
fi
go run ./test/bench/startup -n "${N:-30}" "${args[@]}"
