"""gantry run (make run-gcp): write a run spec into every node's metadata, then follow the run."""

from __future__ import annotations

import argparse

from launch_contract import (
    DEFAULT_CONFIG,
    DEFAULT_MASTER_PORT,
    KIND_KEY,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    NNODES_ENV,
    NODE_RANK_ENV,
    RUN_DIR_ENV,
    STAGING_ENV,
    STATS_FILE,
    STEP_KEY,
    TRAIN_KIND,
)

from gantry import images, nodes, registry, runs, trainer_check
from gantry.cli.follow import follow
from gantry.config import RUN_MAX_MINUTES_FLAG
from gantry.errors import GantryError
from gantry.status import ExitStatus

NAME = "run"
HELP = "start a training run on every node (rendezvous wired), then follow it; Ctrl-C detaches"
DESCRIPTION = f"""\
Start the trainer on every node of the deployment. The trainer checks its --config and the flags after --
on this machine first (python -m selfplay check), and a refusal starts nothing; then the image is looked up in the registry
(REPO/gantry-trainer:cpu, or :cuda with use_gpu, :tpu with use_tpu, as `make build-train` pushed it) and the nodes are
pinned to its digest; stopped nodes are started (they bill while RUNNING); then each node's
instance metadata gets the run spec (run id, image, trainer flags, its node rank, the master's
address). The node agents pull the image and start the containers; torchrun meets at node 0.
Checkpoints, stats.jsonl and TensorBoard events go to gs://BUCKET/runs/RUN_ID.

A run already in progress is not replaced unless you say so (--replace, or yes at the prompt):
replacing it stops it with a final checkpoint.

Then it follows the run (node states, the master's output) until the run ends or you press
Ctrl-C: the run keeps going without your laptop; `make status` and `make logs` pick it up again.
A run with the same id resumes from its newest checkpoint in the bucket (--resume).

Your own trainer: after -- put `-m MODULE ARGS` (or `SCRIPT.py ARGS`) and each node runs
`torchrun --nnodes --node-rank --master-addr --master-port --nproc-per-node -m MODULE ARGS` in the image
(yours with --image, or the trainer image, which holds every package under packages/). It gets
{NNODES_ENV}, {NODE_RANK_ENV}, {MASTER_ADDR_ENV}, {MASTER_PORT_ENV}, {RUN_DIR_ENV} (the bucket folder) and
{STAGING_ENV}; a {STATS_FILE} under {STAGING_ENV} with {{"{KIND_KEY}": "{TRAIN_KIND}", "{STEP_KEY}": N}} records is
what status shows.

examples:
  gantry run                                        # connect4, the image make build-train pushed
  gantry run --config tictactoe -- --run.max_steps=200
  gantry run --image REGION-docker.pkg.dev/P/R/gantry-trainer@sha256:...
  gantry run --resume run-20260601-120000            # after a stop, a preemption or a crash
  gantry run -- -m toytrain.train --steps 200         # your own torchrun program (packages/toytrain)
  make run-gcp ARGS="--detach"
"""


# A flag gantry run does not know is most often the trainer's, given without the -- that passes it on.
UNKNOWN_HINT = "; trainer flags go after --: gantry run [OPTIONS] -- --search.simulations=100"


def add_arguments(parser) -> None:
    parser.add_argument("--config", default=None, help=f"selfplay trainer config (default: {DEFAULT_CONFIG})")
    parser.add_argument("--image", default="", help="trainer image in a registry the nodes can pull from "
                        "(default: REPOSITORY/gantry-trainer:cpu, :cuda with use_gpu, :tpu with use_tpu); pinned to its "
                        "digest")
    parser.add_argument("--run-id", default="", help="name of the new run (default: run-YYYYmmdd-HHMMSS)")
    parser.add_argument("--resume", default="", metavar="RUN_ID", help="continue RUN_ID from its newest checkpoint")
    parser.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT, help="rendezvous port on node 0 "
                        "(default: %(default)s)")
    parser.add_argument("--nproc-per-node", type=int, default=0, help="ranks per node (default: the trainer "
                        "decides: one per GPU, else 1)")
    parser.add_argument("--replace", action="store_true", help="stop a run in progress (final checkpoint) "
                        "and start this one")
    parser.add_argument("--detach", action="store_true", help="start the run and return without following it")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between polls while following")
    parser.add_argument("trainer_args", nargs=argparse.REMAINDER, help="trainer flags after --, e.g. -- "
                        "--run.max_steps=100; or your own program: -- -m PACKAGE.MODULE ARGS")


def run(args, env) -> ExitStatus:
    program = runs.torchrun_program(args.trainer_args)  # before any call: bad words cost nothing
    if program is not None and args.config is not None:
        raise GantryError("--config is a selfplay trainer flag; your torchrun program takes its own flags",
                          f"Drop --config, or put your program's own flags after -- {' '.join(program[:2])}.")
    run_id = runs.check_run_id(args.resume or args.run_id or runs.new_run_id())
    trainer_args = program if program is not None else [a for a in args.trainer_args if a != "--"]
    # the trainer judges its own flags here, so that a typo costs a second, not a started node and a crash loop
    if program is None:
        trainer_check.check_selfplay(args.config or DEFAULT_CONFIG, [*runs.budget(trainer_args), *trainer_args])
    elif not args.image:  # the trainer image: the laptop holds its packages; an image of your own it cannot see
        trainer_check.check_program(program)
    cluster, api = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    image = registry.pinned(args.image or images.repository_image(cluster.repository, cluster.flavour))
    check_nothing_runs(api, cluster, run_id, args, env)
    run_url = cluster.run_url(run_id, env.environ)
    env.say(f"{'Resuming' if args.resume else 'Starting'} run {run_id} on {len(cluster.nodes)} node(s), "
            f"image {image}", f"Run directory: {run_url}"
            + (" (the trainer resumes from its newest checkpoint there)" if args.resume else ""))
    limit = runs.budget(trainer_args) if program is None else []
    if limit:
        env.say(f"Time limit: the trainer stops with a checkpoint after {limit[0][2:]} minutes, the default of a "
                f"gantry run (-- {RUN_MAX_MINUTES_FLAG}=N changes it; 0 = no limit).")
    if program is not None:
        env.say(f"Program: torchrun {' '.join(program)} (rendezvous at node 0; GANTRY_RUN_DIR={run_url})")
    api.ensure_running(env.say)
    specs = runs.launch_specs(cluster, run_id, image, trainer_args, run_url=run_url,
                              config=args.config or DEFAULT_CONFIG, master_port=args.master_port,
                              nproc_per_node=args.nproc_per_node, torchrun=program is not None)
    for node, spec in zip(cluster.nodes, specs):
        api.write_spec(node, spec)
        env.say(f"  node {node.rank} {node.name}: run spec written (rank {node.rank} of {len(cluster.nodes)})")
    if args.detach:
        env.say("Started. Follow it with `make status` or `make logs ARGS=--follow`; stop it with `make stop`.")
        return ExitStatus.OK
    return follow(api, cluster, run_id, env, args.interval)


def check_nothing_runs(api, cluster, run_id: str, args, env) -> None:
    """A new launch replaces whatever the nodes run: refuse unless the user said so."""
    statuses = [api.node_status(node) for node in cluster.nodes]
    runs.require_nodes(statuses)
    active = runs.active_runs(statuses)
    if not active or args.replace:
        return
    held = "; ".join(f"{rid} on node(s) {', '.join(str(s.node.rank) for s in holding)}"
                     + (f" at step {holding[0].report.step}" if holding[0].report.step is not None else "")
                     for rid, holding in sorted(active.items()))
    question = f"Run {held} is in progress. Stop it (final checkpoint) and start {run_id}?"
    if env.stdin.isatty() and env.confirm(question):
        return
    raise GantryError(f"run {held} is in progress; starting {run_id} would stop it",
                      "Pass --replace to stop it and start the new run (make run-gcp ARGS=--replace), "
                      "or stop it first with `make stop`.")
