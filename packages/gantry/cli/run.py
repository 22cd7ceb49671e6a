"""gantry run (make run-gcp): write a run spec into every node's metadata, then follow the run."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from launch_contract import (
    DEADLINE_ENV,
    DEFAULT_MASTER_PORT,
    DEFAULT_SYNC_SECONDS,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    MAX_NPROC_PER_NODE,
    NNODES_ENV,
    NODE_RANK_ENV,
    PROJECT_ROOT,
    RAY_ADDRESS_ENV,
    RAY_PORT,
    RUN_DIR_ENV,
    SYNC_FOLDER,
    sync_url,
)

from gantry import config, images, launches, nodes, projects
from gantry.cli.follow import follow
from gantry.config import MAX_MINUTES_FLAG
from gantry.errors import GantryError
from gantry.gcp import registry
from gantry.launches import program_file, programs
from gantry.status import ExitStatus

NAME = "run"
HELP = "start a training run (or your own command) on every node, rendezvous wired, then follow it; Ctrl-C detaches"
DESCRIPTION = f"""\
Start a program on every node of the deployment: the command after --, or, when only flags follow -- (or nothing),
the program the project's {program_file.FILE_NAME} declares with those flags appended: the kit's own trainer is
declared so in the repository's {program_file.FILE_NAME}, a project of yours (--project DIR) in its own. The file's
check, if it names one, runs on this machine first with the same flags, and a refusal starts nothing; then the
image is looked up in the registry (REPO/gantry-trainer:cpu, or :cuda with use_gpu, :tpu with use_tpu, as
`make build-train` pushed it; your project's with --project) and the nodes are pinned to its digest;
stopped nodes are started (they bill while RUNNING); then each node's instance metadata gets the run spec (run id,
image, the program, its node rank, the master's address, every node's address). The node agents pull the image and
start the containers.

A run already in progress is not replaced unless you say so (--replace, or yes at the prompt):
replacing it stops it with a final checkpoint.

Then it follows the run (node states, the master's output) until the run ends or you press
Ctrl-C: the run keeps going without your laptop; `make status` and `make logs` pick it up again.
A run with the same id gets the same folder back (--resume names a run the bucket holds; the check then gets that
folder in {RUN_DIR_ENV}, as a node gives it: the kit's trainer reads its newest checkpoint here first and refuses a
net it does not fit before a node starts).

After --, `-m MODULE ARGS` (or `SCRIPT.py ARGS`) runs under torchrun on each node
(`torchrun --nnodes --node-rank --master-addr --master-port --nproc-per-node -m MODULE ARGS`, in your image with
--image or --project, else the kit's image, which holds every package under packages/). Any other first word
(python, bash, ./run.sh, accelerate) is a plain command, run as given in the image's working directory on every
node. Either gets {NNODES_ENV}, {NODE_RANK_ENV}, {MASTER_ADDR_ENV}, {MASTER_PORT_ENV}, the GANTRY_NODE_RANK /
GANTRY_NUM_NODES / GANTRY_NODE_IPS / GANTRY_GPUS_PER_NODE names and {RUN_DIR_ENV} (the bucket folder, which the
agent writes: a program writes local folders). The --stats FILE you name is what status shows (the numbers
{program_file.FILE_NAME}'s figures name, else the first).

Every launch has a time limit ({MAX_MINUTES_FLAG}, 240 minutes unless you say; 0 removes it),
counted from the launch and kept by each node's agent: it stops the program then (SIGTERM, the grace to checkpoint,
the last copy of its --sync folders) and records the end in the bucket, as it does when the program exits 0 or is
stopped, so no later `make status` or `make run-gcp` starts those nodes again. The program sees the moment in
{DEADLINE_ENV} (epoch seconds); the trainer plans its own end before it. --stall-minutes N treats a program that
prints no new line and writes no new stats for N minutes as crashed: stopped and restarted.

Your own project (--project DIR): the image `make build-train PROJECT=DIR` pushed of the folder's current version
(its git commit, or a hash of its files while edits are uncommitted; then the kit's torch recipe when gantry
writes its Dockerfile), the folder at {PROJECT_ROOT}, its WORKDIR.
--sync DIR keeps a folder of each node in the bucket ({RUN_DIR_ENV}/{SYNC_FOLDER}/node-RANK/DIR; `make fetch`
brings it home) and gives it back to a restarted node.

examples:
  gantry run                                        # the kit's trainer (gantry.yaml), the image make build-train pushed
  gantry run --project ../my-trainer -- --epochs 3   # the command its gantry.yaml declares, these flags added
  gantry run --image REGION-docker.pkg.dev/P/R/gantry-trainer@sha256:...
  gantry run --resume run-20260601-120000            # after a stop, a preemption or a crash
  gantry run --sync out --stats out/stats.jsonl -- -m toytrain.train --steps 200   # a torchrun program
  gantry run --project ../my-trainer --sync checkpoints -- python train.py --gpus all
  gantry run --max-minutes 60 --env WANDB_MODE=offline --project ../my-trainer -- python train.py
  gantry run --ray --project ../my-ray-project -- python selfplay.py   # one Ray cluster over the nodes
  make run-gcp ARGS="--detach"
"""


GPUS_PER_NODE = "accelerator_count"  # infra/variables.tf: the GPUs of each node (use_gpu = true)


def unknown_hint(unknown: list[str]) -> str:
    """The end of the usage error for flags gantry run does not know: a GPU count is a setting of the nodes."""
    if any(word.split("=")[0] in ("--gpus", "--gpu", "--num-gpus", "--ngpus") for word in unknown):
        return (f"; the GPUs per node are the deployment's: set use_gpu = true and {GPUS_PER_NODE} = N in "
                f"infra/terraform.tfvars, then `make apply`; your program's own flags go after --: gantry run "
                f"[OPTIONS] -- python train.py --gpus all")
    # a flag gantry run does not know is most often the program's, given without the -- that passes it on
    return f"; the program's own flags go after --: gantry run [OPTIONS] -- {' '.join(unknown)}"


UNKNOWN_HINT = unknown_hint


def add_arguments(parser) -> None:
    parser.add_argument("--image", default="", help="trainer image in a registry the nodes can pull from "
                        "(default: REPOSITORY/gantry-trainer:cpu, :cuda with use_gpu, :tpu with use_tpu); pinned to its "
                        "digest")
    parser.add_argument("--project", type=Path, default=None, metavar="DIR", help="your own project's folder: run "
                        "the image `make build-train PROJECT=DIR` pushed of its current version (REPOSITORY/NAME:"
                        "FLAVOUR-VERSION[-KIT]), with the command after --")
    parser.add_argument("--sync", action="append", default=[], metavar="DIR", help="a folder (relative to the "
                        "program's working directory) each node copies to RUN_DIR/sync/node-RANK/DIR while the program "
                        "runs, at its end and at a stop; a restarted node gets it back (repeatable)")
    parser.add_argument("--sync-every", type=int, default=DEFAULT_SYNC_SECONDS, metavar="SECONDS",
                        help="seconds between the copies of the --sync folders (default: %(default)s)")
    parser.add_argument("--stats", default="", metavar="FILE", help="your program's own stats (a JSON object or JSON "
                        "lines, relative to its working directory): `gantry status` shows their numbers")
    parser.add_argument("--max-minutes", type=float, default=None, metavar="N", help="stop the run N minutes after "
                        "this launch, on every node (SIGTERM, the grace to checkpoint), and never start its nodes "
                        f"for it again (default: {launches.DEFAULT_RUN_MAX_MINUTES:g}; 0 = no limit)")
    parser.add_argument("--stall-minutes", type=float, default=0.0, metavar="N", help="a node whose program prints "
                        "no new line and writes no new stats for N minutes is stopped and restarted, as after a crash "
                        "(default: 0 = never)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="an environment variable "
                        "the program gets on every node (repeatable)")
    parser.add_argument("--shm-size", default="", metavar="SIZE", help="the container's /dev/shm, as docker run "
                        "takes it (8g); default: the agent's 4g, with --ray 30%% of the node's memory (Ray's object "
                        "store)")
    parser.add_argument("--cpus", type=float, default=0.0, metavar="N", help="the node's CPUs the program may use "
                        "(docker run --cpus; default: all)")
    parser.add_argument("--gpu-ids", default="", metavar="LIST", help="the node's GPUs the program gets, by index "
                        "(0,1; default: all of a GPU node's); GANTRY_GPUS_PER_NODE counts them")
    parser.add_argument("--run-id", default="", help="name of the new run (default: run-YYYYmmdd-HHMMSS)")
    parser.add_argument("--resume", default="", metavar="RUN_ID", help="launch RUN_ID again in its folder (a run "
                        "the bucket holds): the kit's trainer continues from its newest checkpoint there")
    parser.add_argument("--master-port", type=int, default=DEFAULT_MASTER_PORT, help="rendezvous port on node 0 "
                        "(default: %(default)s)")
    parser.add_argument("--nproc-per-node", type=int, default=0, help="ranks per node, up to "
                        f"{MAX_NPROC_PER_NODE} (default: the trainer decides: one per GPU, else 1)")
    parser.add_argument("--ray", action="store_true", help="one Ray cluster across the nodes: node 0 starts a Ray "
                        "head and runs the command with RAY_ADDRESS (its ray.init() joins), every other node joins the "
                        "head and runs nothing else, and ends when node 0's command has ended (gantry.yaml: ray: true)")
    parser.add_argument("--replace", action="store_true", help="stop a run in progress (final checkpoint) "
                        "and start this one")
    parser.add_argument("--detach", action="store_true", help="start the run and return without following it")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between polls while following")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="after --: flags for the program "
                        f"{program_file.FILE_NAME} declares (-- --epochs 3), or a "
                        "program: -m PACKAGE.MODULE ARGS, SCRIPT.py ARGS (under torchrun) or COMMAND ARGS (as given)")


def run(args, env) -> ExitStatus:
    program, declared = programs.resolve(args.program, args.project)  # before any call: bad words cost nothing
    sync, stats_file = check_outputs(args, program, declared)
    limits = programs.check_launch(args.max_minutes, args.stall_minutes, args.env, args.shm_size, args.master_port,
                                   args.nproc_per_node, args.cpus, args.gpu_ids)
    if args.cpus or limits["gpu_ids"]:
        programs.check_resources(args.cpus, limits["gpu_ids"], deployment_or_none(args))
    run_id = launches.check_run_id(args.resume or args.run_id or launches.new_run_id())
    # the program judges its own flags here, so that a typo costs a second, not a started node and a crash loop
    if declared is not None:
        program_file.run_check(declared, programs.flags_of(args.program))
    elif program.torchrun and not args.image and args.project is None:  # the kit's image: the laptop holds its
        program_file.check_module(list(program.words))  # packages; an image of your own it cannot see
    ray = args.ray or bool(declared and declared.ray)
    if ray:
        programs.check_ray(program, args.project)  # the program and its code first: no engine, no Google
    cluster, api = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    image = pinned_image(args, cluster)
    found_ray = programs.ray_in_image(local_image(args, cluster)) if ray else ""
    check_nothing_runs(api, cluster, run_id, args, env)
    run_url = cluster.run_url(run_id, env.environ)
    checked = ""
    if args.resume:
        check_resumable(cluster, run_id, env)
        if declared is not None:  # given the run's folder, as a node gives it: what it resumes from is read here
            checked = program_file.run_check(declared, programs.flags_of(args.program), run_url=run_url)
    env.say(f"{'Resuming' if args.resume else 'Starting'} run {run_id} on {len(cluster.nodes)} node(s), "
            f"image {image}", f"Run directory: {run_url}" + (f"; its check: {checked}" if checked else ""))
    env.say(program.describe(run_url) + (f" ({declared.path.name}'s command)" if declared is not None else ""))
    if ray:
        env.say(f"Ray: node 0 starts a Ray head (port {RAY_PORT}) and runs the command with {RAY_ADDRESS_ENV}; nodes "
                f"1-{len(cluster.nodes) - 1} join it and run nothing else, and end when node 0's command has ended; "
                "each node's /dev/shm is 30% of its memory, Ray's object store" + (f" (image's ray: {found_ray})"
                                                                                   if found_ray else "")
                if len(cluster.nodes) > 1 else f"Ray: one node: node 0 starts a Ray head and runs the command with "
                f"{RAY_ADDRESS_ENV}")
    env.say(time_limit(args, limits["max_minutes"]))
    if args.stall_minutes:
        env.say(f"Stall limit: a node whose program prints no new line and writes no new stats for "
                f"{args.stall_minutes:g} min is stopped and restarted, as after a crash.")
    for pair in limits["env"]:
        env.say(f"Environment: {pair}")
    if args.cpus or limits["gpu_ids"]:
        env.say("Resources: each node's program gets " + " and ".join(filter(None, [
            f"{args.cpus:g} CPUs" if args.cpus else "", f"GPUs {','.join(map(str, limits['gpu_ids']))}"
            if limits["gpu_ids"] else ""])) + " (the rest of the node stays idle)")
    for folder in sync:
        env.say(f"Sync: each node copies {folder}/ every {args.sync_every} s and when the program ends or is stopped "
                f"to {sync_url(run_url, 0, folder)} (node 0; node N's under node-N)")
    if stats_file:
        env.say(f"Stats: each node's agent reads {stats_file} (a JSON object or JSON lines); `make status` shows "
                "its numbers")
    api.ensure_running(env.say)
    specs = launches.launch_specs(cluster, run_id, image, list(program.words), run_url=run_url,
                              master_port=args.master_port, nproc_per_node=args.nproc_per_node,
                              torchrun=program.torchrun, command=program.command, sync=sync,
                              sync_seconds=args.sync_every, stats_file=stats_file,
                              figures=declared.figures if declared else {}, show=declared.show if declared else {},
                              ray=ray, **limits)
    for node, spec in zip(cluster.nodes, specs):
        api.write_spec(node, spec)
        env.say(f"  node {node.rank} {node.name}: run spec written (rank {node.rank} of {len(cluster.nodes)})")
    if args.detach:
        env.say("Started. Follow it with `make status` or `make logs ARGS=--follow`; stop it with `make stop`.")
        return ExitStatus.OK
    return follow(api, cluster, run_id, env, args.interval)


def check_outputs(args, program, declared) -> tuple[tuple[str, ...], str]:
    """--project, --sync, --sync-every and --stats (with gantry.yaml's sync and stats), judged before anything is
    asked of Google."""
    if args.project is not None and args.image:
        raise GantryError("--project and --image both name the image", "Drop one of them: --project runs the "
                          "image `make build-train PROJECT=DIR` pushed.")
    if args.sync_every <= 0:
        raise GantryError(f"--sync-every {args.sync_every} is not a number of seconds", "Give it a positive number "
                          f"(default {DEFAULT_SYNC_SECONDS}).")
    sync = programs.sync_folders([*(declared.sync if declared else ()), *args.sync], args.project)
    stats = args.stats or (declared.stats if declared else "")
    return sync, programs.relative_path(stats, "stats file", "--stats", args.project) if stats else ""


def pinned_image(args, cluster) -> str:
    """The image every node runs, pinned to the digest the registry holds for it (--image, the project's current
    version, or the trainer image of the nodes' flavour)."""
    if args.project is None:
        return registry.pinned(args.image or images.repository_image(cluster.repository, cluster.flavour))
    return registry.pinned(projects.image_ref(cluster.repository, args.project, cluster.flavour), fix=(
        f"Build and push it: `make build-train PROJECT={args.project}` (the tag is the project's version: its git "
        "commit, or a hash of its files while edits are uncommitted, then the kit's torch recipe where gantry writes "
        "its Dockerfile, so each commit, edit or kit upgrade needs a build)."))


def local_image(args, cluster) -> str:
    """The image `gantry run` launches, by the name this machine's engine holds it under after a build (""
    for --image: the registry's, which this machine may never have pulled)."""
    if args.project is not None:
        return projects.local_ref(args.project, cluster.flavour)
    return "" if args.image else images.local_tag(cluster.flavour)


def check_resumable(cluster, run_id: str, env) -> None:
    """--resume names a run the bucket holds: a typo would start a new run under the wrong name."""
    bucket = cluster.bucket_url(env.environ)
    held = launches.run_ids(bucket)
    if run_id in held:
        return
    listed = ", ".join(held[-10:]) + (f" (the newest 10 of {len(held)})" if len(held) > 10 else "")
    raise GantryError(f"no run {run_id} in {bucket}/runs/ to resume",
                      f"Resume one it holds ({listed}), or start a new run without --resume." if held else
                      "The bucket holds no run yet: start one without --resume.")


def deployment_or_none(args):
    """The deployment infra/terraform.tfvars describes, or None where it cannot be read (then only the nodes judge)."""
    try:
        return config.load(args.var_file, args.infra_dir)
    except GantryError:
        return None


def time_limit(args, minutes: float) -> str:
    """What ends this launch by itself: its limit, kept by the nodes' agents; without one, max_run_hours (read as
    `make cost` reads it)."""
    if minutes:
        at = time.strftime("%H:%M UTC", time.gmtime(time.time() + 60 * minutes))
        return (f"Time limit: {minutes:g} min; every node stops the run at {at} (SIGTERM, the grace to checkpoint) "
                f"and records its end, and no verb starts its nodes again ({MAX_MINUTES_FLAG} N changes it; 0 = none).")
    try:
        hours = config.load(args.var_file, args.infra_dir).max_run_hours
    except GantryError:
        return (f"Time limit: none ({MAX_MINUTES_FLAG} 0); max_run_hours in infra/terraform.tfvars, as applied, "
                "stops the nodes (0: never).")
    if not hours:
        return (f"Time limit: none ({MAX_MINUTES_FLAG} 0) and max_run_hours = 0 (infra/terraform.tfvars): the nodes "
                "bill until the program ends and they idle off, or until `make stop`.")
    return (f"Time limit: none ({MAX_MINUTES_FLAG} 0); the nodes stop after max_run_hours = {hours:g} h up "
            "(infra/terraform.tfvars), whatever the program is doing.")


def check_nothing_runs(api, cluster, run_id: str, args, env) -> None:
    """A new launch replaces whatever the nodes run: refuse unless the user said so."""
    statuses = [api.node_status(node) for node in cluster.nodes]
    launches.require_nodes(statuses)
    active = launches.active_runs(statuses)
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
