"""gantry fetch (make fetch RUN=...): a whole run from the bucket into runs/."""

from __future__ import annotations

from pathlib import Path

from gantry import launches, nodes
from gantry.status import ExitStatus

NAME = "fetch"
HELP = "copy a run's folder from the bucket to runs/RUN_ID: each node's --sync folders and the agents' end records"
DESCRIPTION = """\
Download gs://BUCKET/runs/RUN_ID (GANTRY_RUN_DIR, which the nodes' agents write:
each node's --sync folders under sync/node-RANK/DIR, among them the kit's trainer's run folder with its
checkpoints, stats.jsonl and TensorBoard events, sync/node-0/trainer; the agents' end records under ended/) into
runs/RUN_ID, where `tensorboard --logdir runs/RUN_ID` and local training (`make train-local
RUN_DIR=runs/RUN_ID/sync/node-0/trainer` resumes the kit's trainer) find them. Works while the run trains: only
new or grown files are copied again.
Egress from the bucket bills per GB.

examples:
  gantry fetch run-20260601-120000
  make fetch RUN=run-20260601-120000
"""


def add_arguments(parser) -> None:
    parser.add_argument("run_id", metavar="RUN", help="the run id `make run-gcp` printed")
    parser.add_argument("--dest", type=Path, default=Path("runs"), help="parent folder (default: %(default)s)")


def run(args, env) -> ExitStatus:
    launches.check_run_id(args.run_id)  # before any call: `..` would copy the bucket's runs/ folder, or nothing
    cluster, _ = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    source = cluster.run_url(args.run_id, env.environ)
    target = args.dest / args.run_id
    copied = launches.fetch(source, str(target))
    for name, size in copied:
        env.say(f"  {name:<28} {size / 1e6:8.1f} MB")
    env.say(f"Copied {len(copied)} file(s) from {source} to {target}/.")
    return ExitStatus.OK
