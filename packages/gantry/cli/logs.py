"""gantry logs (make logs): the master's trainer output, read through Google's APIs (no SSH)."""

from __future__ import annotations

import time

from gantry import nodes
from gantry.errors import GantryError
from gantry.status import ExitStatus

NAME = "logs"
HELP = "the trainer's output on node 0 (or --node N), from the serial port (a TPU VM: the bucket); --follow keeps reading"
DESCRIPTION = """\
Print what the node agent mirrored to serial port 2: the trainer's output (progress lines, evals)
and the agent's own events. No SSH: it comes through the Compute API (getSerialPortOutput), which
keeps the last 1 MB. A Cloud TPU VM has no serial port API: there the agent uploads the same output
every few seconds to the run's folder (gs://BUCKET/runs/RUN_ID/logs/node-N.log), read from there.
--follow polls for new output until Ctrl-C; the run is not affected.

examples:
  gantry logs
  gantry logs --follow
  make logs ARGS="--follow --node 1"
"""


def add_arguments(parser) -> None:
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new output until Ctrl-C")
    parser.add_argument("--node", type=int, default=0, help="node rank (default: 0, the master)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between polls with --follow")


def run(args, env) -> ExitStatus:
    cluster, api = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    if not 0 <= args.node < len(cluster.nodes):
        raise GantryError(f"--node {args.node} does not exist", f"Choose 0..{len(cluster.nodes) - 1}.")
    node = cluster.nodes[args.node]
    offset = 0
    try:
        while True:
            text, offset = api.output(node, offset)
            if text:
                env.stdout.write(text)
                env.stdout.flush()
            if not args.follow:
                return ExitStatus.OK
            if not text:
                time.sleep(args.interval)
    except KeyboardInterrupt:
        env.say("", "Stopped following; the run goes on (`make status`).")
        return ExitStatus.OK
