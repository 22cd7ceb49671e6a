"""gantry fetch (make fetch RUN=...): a whole run from the bucket into runs/."""

from __future__ import annotations

from pathlib import Path

from gantry import nodes, runs
from gantry.status import ExitStatus

NAME = "fetch"
HELP = "copy a run's folder (what its program wrote there) and its --sync folders from the bucket to runs/RUN_ID"
DESCRIPTION = """\
Download gs://BUCKET/runs/RUN_ID (what the program wrote to its run folder, GANTRY_RUN_DIR: the kit's
trainer keeps its checkpoints, stats.jsonl and TensorBoard events there; the agents' end records under ended/; and
each node's --sync folders under sync/node-RANK/DIR) into runs/RUN_ID, where `tensorboard --logdir runs/RUN_ID` and
local training (`make train-local RUN_DIR=runs/RUN_ID` resumes the kit's trainer) find them. Works while the run
trains: only new or grown files are copied again.
Egress from the bucket bills per GB.

examples:
  gantry fetch run-20260601-120000
  make fetch RUN=run-20260601-120000
"""


def add_arguments(parser) -> None:
    parser.add_argument("run_id", metavar="RUN", help="the run id `make run-gcp` printed")
    parser.add_argument("--dest", type=Path, default=Path("runs"), help="parent folder (default: %(default)s)")


def run(args, env) -> ExitStatus:
    runs.check_run_id(args.run_id)  # before any call: `..` would copy the bucket's runs/ folder, or nothing
    cluster, _ = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    source = cluster.run_url(args.run_id, env.environ)
    target = args.dest / args.run_id
    copied = runs.fetch(source, str(target))
    for name, size in copied:
        env.say(f"  {name:<28} {size / 1e6:8.1f} MB")
    env.say(f"Copied {len(copied)} file(s) from {source} to {target}/.")
    return ExitStatus.OK
