"""A project's own program for the agent's tests (a launch with --command, --sync ckpt, --stats metrics.json):

    python stub_program.py

Run in its image's working directory, it resumes from the newest ckpt/step-N.txt there (what the agent restored
from the bucket), prints what it resumed from and the GANTRY_* names it was given, then every 0.1 s writes
ckpt/step-N.txt and metrics.json ({"iteration": N, "loss": ...}, its own stats) and prints `iteration N`. On
SIGTERM it writes ckpt/final.txt and exits 0, as a program that checkpoints on SIGTERM would.
"""

import glob
import json
import os
import signal
import sys
import time

steps = [int(path.rsplit("-", 1)[1][:-4]) for path in glob.glob("ckpt/step-*.txt")]
step = max(steps, default=0)
print(f"resumed from step {step}" if steps else "no checkpoint: starting at step 0", flush=True)
print("env " + " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("GANTRY_")), flush=True)


def on_term(_signum, _frame):
    with open("ckpt/final.txt", "w") as final:
        final.write(f"stopped at step {step}\n")
    print(f"SIGTERM: saved ckpt/final.txt at step {step}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
while True:
    step += 1
    with open(f"ckpt/step-{step}.txt", "w") as checkpoint:
        checkpoint.write(f"step {step}\n")
    with open("metrics.json.tmp", "w") as metrics:
        json.dump({"iteration": step, "loss": 1.0 / step, "lr": 0.001}, metrics)
    os.replace("metrics.json.tmp", "metrics.json")
    print(f"iteration {step}", flush=True)
    time.sleep(0.1)
