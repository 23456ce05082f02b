"""A minimal stand-in for pilot-workers' per-job dispatch child.

pilot-workers' fanout runs `python -m pilot_workers.cli.dispatch ...` once
per job; that child makes a run directory, prints a started event, runs the
worker with both streams piped into a stream log, writes a record and
prints the verdict as its last stdout line. This file does the same, and
nothing more, so that the benchmark measures the architecture (a Python
interpreter per job) rather than the seed's extra features. It is used
only by pilot's benchmarks.

Usage: python3 standin.py --provider P --mode M --workdir W --task-file F
       --run-dir R -- ARGV...
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--task-file", required=True)
    ap.add_argument("--run-dir", required=True)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv

    started = time.time()
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime(started)) + "-" + args.provider + "-" + uuid.uuid4().hex[:8]
    run_dir = os.path.join(args.run_dir, run_id)
    os.makedirs(run_dir, mode=0o700)
    record_path = os.path.join(run_dir, "record.json")
    event = {"type": "worker_runner.started", "provider": args.provider, "mode": args.mode,
             "run_id": run_id, "run_dir": run_dir}
    print(json.dumps(event), flush=True)

    env = {"PATH": os.environ.get("PATH", ""), "PILOT_RUN_ID": run_id}
    stream = open(os.path.join(run_dir, "stream.log"), "w", encoding="utf-8")
    lock = threading.Lock()
    tail = []

    task = open(args.task_file, "rb")
    proc = subprocess.Popen(argv, cwd=args.workdir, env=env, stdin=task,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)

    def drain(pipe, tag):
        for line in pipe:
            with lock:
                stream.write(tag + line)
                if tag == "err ":
                    tail.append(line)

    readers = [threading.Thread(target=drain, args=(proc.stdout, "out ")),
               threading.Thread(target=drain, args=(proc.stderr, "err "))]
    for t in readers:
        t.start()
    task.close()
    code = proc.wait()
    for t in readers:
        t.join()
    stream.close()

    verdict = {"type": "worker_runner.verdict", "provider": args.provider, "mode": args.mode,
               "run_id": run_id, "verdict": "completed" if code == 0 else "error",
               "exit_code": code, "stderr_tail": "".join(tail)[-500:],
               "duration_ms": int((time.time() - started) * 1000), "record": record_path}
    tmp = record_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(verdict, f)
    os.replace(tmp, record_path)
    print(json.dumps(verdict), flush=True)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
