#!/usr/bin/env bash
# Fanout of 1000 trivial jobs, 64 at a time, against errgroup + os/exec
# over the same worker. Goal: ratio <= 1.2. Memory per in-flight job (256
# at once; goal <= 256 KiB):
#   go test -run '^$' -bench FanoutInFlightMemory -benchtime 3x .
# All the goals side by side: go run ./tools/bench
BENCHTIME=${BENCHTIME:-1x} exec "$(dirname "$0")/bench-ratio.sh" BenchmarkFanout1000 BenchmarkErrgroupExec1000 1.2 fanout
