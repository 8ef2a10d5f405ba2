"""The fake command: answers as the candidate's first line (`mode: NAME`) asks, always saying on stderr what
it did, so that tests can check nothing it printed is lost."""
import json
import os
import signal
import sys
import time

mode = open(sys.argv[1]).readline().split(":", 1)[1].strip()
print(f"judge: mode {mode}, seed {sys.argv[2]}", file=sys.stderr)
good = json.dumps({"correct": True, "latency": 12.5, "unit": "us", "noise": {"reps": 7}})
if mode == "ok":
    print(good)
elif mode == "two-lines":
    print("compiled in 0.2 s")
    print(good)
elif mode == "not-json":
    print("latency = 12.5 us")
elif mode == "missing-field":
    print(json.dumps({"latency": 12.5, "unit": "us"}))
elif mode == "wrong-unit":
    print(json.dumps({"correct": True, "latency": 12.5, "unit": "ms"}))
elif mode == "crash":
    print(good)
    sys.exit(3)
elif mode == "signal":
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
elif mode == "timeout":
    print("still measuring", flush=True)
    time.sleep(60)
elif mode == "wrong":
    print(json.dumps({"correct": False, "error": "output[3] = 1, expected 2", "error_kind": "wrong_result"}))
