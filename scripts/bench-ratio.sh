#!/usr/bin/env bash
# bench-ratio.sh PILOT_BENCH BASELINE_BENCH GOAL LABEL reports the median
# time of a pilot benchmark against the median of its baseline, measured
# side by side in the same test binary, alternating, and their ratio
# against the goal (a maximum ratio). bench-dispatch.sh and bench-fanout.sh
# call it.
#
# It is a report: it exits 0 whether the ratio meets the goal or not, and
# non-zero only if the benchmarks failed to run.
#
# Environment: BENCHTIME (default 200x) is the -benchtime of each round and
# COUNT (default 5) the number of rounds; the table shows medians.
set -euo pipefail

cd "$(dirname "$0")/.."

pilot_bench=$1
base_bench=$2
goal=$3
label=$4
count=${COUNT:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/bench.txt

# Build once, then run both benchmarks once per round so that the machine's
# noise falls on both alike (go test -count=N would run all of one before
# any of the other).
if ! go test -c -o "$tmp/pilot.test" . >"$out" 2>&1; then
	cat "$out" >&2
	echo "bench-ratio: building the test binary failed" >&2
	exit 1
fi
for ((i = 1; i <= count; i++)); do
	if ! "$tmp/pilot.test" -test.run '^$' \
		-test.bench "^(${pilot_bench}|${base_bench})\$" \
		-test.benchtime="${BENCHTIME:-200x}" -test.count=1 >"$tmp/round.txt" 2>&1; then
		cat "$tmp/round.txt" >&2
		echo "bench-ratio: the benchmarks failed" >&2
		exit 1
	fi
	grep '^Benchmark' "$tmp/round.txt" | tee -a "$out"
done
echo

awk -v goal="$goal" -v pb="$pilot_bench" -v bb="$base_bench" -v label="$label" '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
		a[j + 1] = t
	}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# Benchmark names carry a -GOMAXPROCS suffix; ns/op is the field before
# its unit.
{
	name = $1
	sub(/-[0-9]+$/, "", name)
	if (name != pb && name != bb) next
	for (i = 2; i < NF; i++) {
		if ($(i + 1) == "ns/op") {
			if (name == pb) p[++np] = $i
			else e[++ne] = $i
		}
	}
}
END {
	if (np == 0 || ne == 0) {
		print "bench-ratio: no results in the benchmark output" > "/dev/stderr"
		exit 1
	}
	pm = median(p, np) / 1e6
	em = median(e, ne) / 1e6
	ratio = pm / em
	printf "%-22s %10.3f  (median of %d)\n", "pilot ms/" label, pm, np
	printf "%-22s %10.3f  (median of %d)\n", "baseline ms/" label, em, ne
	printf "%-22s %10.3f\n", "ratio pilot/baseline", ratio
	printf "%-22s %10s\n", "goal", "<= " goal
	printf "%-22s %10s\n", "result", (ratio <= goal ? "pass" : "short")
}
' "$out"
