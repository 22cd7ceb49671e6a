"""gantry cost: the hourly price of the deployment in terraform.tfvars (offline)."""

from __future__ import annotations

from gantry import config, cost
from gantry.local_world import LOCAL_ENV
from gantry.status import ExitStatus

NAME = "cost"
HELP = "print $/h of the configured nodes and the cost of a max_run_hours run (no cloud calls)"
DESCRIPTION = """\
Print what the deployment in infra/terraform.tfvars costs per hour: each node's VM, GPU
and boot disk at list price (on-demand or Spot), the total for node_count nodes, and the
cost of one run of max_run_hours. A TPU VM (use_tpu = true) is priced per chip-hour;
with --trc it is marked free under a TPU Research Cloud allocation, list price still shown.
Needs no credentials; calls no API. The price table is packages/gantry/prices.json (sources
and dates inside).

examples:
  gantry cost
  gantry cost --var-file my.tfvars
  gantry cost --trc
  make cost
  make cost ARGS=--trc
"""


def add_arguments(parser) -> None:
    parser.add_argument("--trc", action="store_true",
                        help="the project has a TPU Research Cloud allocation: TPU VMs are free while it lasts")


def run(args, env) -> ExitStatus:
    deployment = config.load(args.var_file, args.infra_dir)
    env.say(f"Deployment: {deployment.describe()}")
    env.say(*cost.render(cost.estimate(deployment, trc=args.trc), local=LOCAL_ENV in env.environ))
    return ExitStatus.OK
