#!/usr/bin/env bash
# Following a worker's memory: one sample of a running tree of four
# processes (a dispatch takes one per heartbeat, a second by default, so
# its time is the cost per worker per second) against a whole dispatch of
# /bin/echo, which exits within a heartbeat and so samples nothing. Goal:
# a worker followed for a second costs at most half a trivial dispatch.
exec "$(dirname "$0")/bench-ratio.sh" BenchmarkMemorySample BenchmarkDispatchTrivial 0.5 op
