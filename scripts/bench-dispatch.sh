#!/usr/bin/env bash
# bench-dispatch.sh reports pilot's per-job overhead: the median time of one
# Dispatch of /bin/echo against the median time of running it with plain
# os/exec, measured side by side in the same test binary, alternating.
#
# It is a report: it exits 0 whether the ratio meets the goal or not, and
# non-zero only if the benchmarks failed to run.
#
# Environment: BENCHTIME (default 200x) is the -benchtime of each round and
# COUNT (default 5) the number of rounds; the table shows medians.
set -euo pipefail

cd "$(dirname "$0")/.."

goal=1.10
count=${COUNT:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/bench.txt

# Build once, then run both benchmarks once per round so that the machine's
# noise falls on both alike (go test -count=N would run all of one before
# any of the other).
if ! go test -c -o "$tmp/pilot.test" . >"$out" 2>&1; then
	cat "$out" >&2
	echo "bench-dispatch: building the test binary failed" >&2
	exit 1
fi
for ((i = 1; i <= count; i++)); do
	if ! "$tmp/pilot.test" -test.run '^$' \
		-test.bench 'BenchmarkDispatchTrivial|BenchmarkExecTrivial' \
		-test.benchtime="${BENCHTIME:-200x}" -test.count=1 >"$tmp/round.txt" 2>&1; then
		cat "$tmp/round.txt" >&2
		echo "bench-dispatch: the benchmarks failed" >&2
		exit 1
	fi
	grep '^Benchmark' "$tmp/round.txt" | tee -a "$out"
done
echo

awk -v goal="$goal" '
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
/^BenchmarkDispatchTrivial/ || /^BenchmarkExecTrivial/ {
	for (i = 2; i < NF; i++) {
		if ($(i + 1) == "ns/op") {
			if ($1 ~ /^BenchmarkDispatchTrivial/) p[++np] = $i
			else e[++ne] = $i
		}
	}
}
END {
	if (np == 0 || ne == 0) {
		print "bench-dispatch: no results in the benchmark output" > "/dev/stderr"
		exit 1
	}
	pm = median(p, np) / 1e6
	em = median(e, ne) / 1e6
	ratio = pm / em
	printf "%-22s %10.3f  (median of %d)\n", "pilot ms/job", pm, np
	printf "%-22s %10.3f  (median of %d)\n", "os/exec ms/job", em, ne
	printf "%-22s %10.3f\n", "ratio pilot/exec", ratio
	printf "%-22s %10s\n", "goal", "<= " goal
	printf "%-22s %10s\n", "result", (ratio <= goal ? "pass" : "short")
}
' "$out"
