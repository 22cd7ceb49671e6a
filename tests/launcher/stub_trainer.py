"""A trainer-shaped process for the agent's tests: progress lines, SIGTERM -> "checkpoint" -> exit 0.

    stub_trainer.py [--steps N] [--out DIR] [--crash-once-at K --marker PATH] [--no-rendezvous]

Prints `step N | games ...` every 0.1 s and records each step in DIR/stats.jsonl (default stub/, in its working
folder) with the trainer's own writer (selfplay.stats.RunLog), where the agent reads its progress when the spec
names it (stats_file, test_agent.STATS); exits 0 after N
steps (0 = never); with --crash-once-at it exits 3 at step K the first time (when PATH does not exist
yet), as a crashing trainer would; with --no-rendezvous it exits 1 before its first step, as torchrun does
when a peer node never comes (a preempted Spot node).
"""

import argparse
import os
import signal
import sys
import time

from selfplay.stats import RunLog

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=0)
parser.add_argument("--crash-once-at", type=int, default=0)
parser.add_argument("--marker", default="")
parser.add_argument("--no-rendezvous", action="store_true")
parser.add_argument("--out", default="stub")
args, _ = parser.parse_known_args()
step = 0


def on_term(_signum, _frame):
    print(f"SIGTERM: checkpoint at step {step}", flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
stats = RunLog(args.out)
print(f"stub trainer: node {os.environ.get('NODE_RANK')} of {os.environ.get('NNODES')}, "
      f"master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}", flush=True)
if args.no_rendezvous:
    time.sleep(0.3)
    print("stub trainer: rendezvous timed out (a peer node is missing)", flush=True)
    sys.exit(1)
while args.steps == 0 or step < args.steps:
    step += 1
    print(f"step {step} | games {step * 3} | loss 0.5", flush=True)
    stats.record(step, {"selfplay/games": step * 3, "losses/total": 0.5})
    if args.crash_once_at and step == args.crash_once_at and not os.path.exists(args.marker):
        open(args.marker, "w").close()
        print("stub trainer: crashing", flush=True)
        sys.exit(3)
    time.sleep(0.1)
print(f"stub trainer: finished at step {step}", flush=True)
