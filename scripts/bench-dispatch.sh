#!/usr/bin/env bash
# Dispatcher.Dispatch of /bin/echo against plain os/exec of it: pilot's
# overhead per job. Goal: ratio <= 1.10.
exec "$(dirname "$0")/bench-ratio.sh" BenchmarkDispatchTrivial BenchmarkExecTrivial 1.10 job
