"""gantry run-local (make run-local): your project's image on this machine, run the way one node runs it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from launch_contract import DEFAULT_SYNC_SECONDS, PROJECT_ROOT, RunSpec

from gantry import images, launches, projects
from gantry.errors import GantryError
from gantry.launches import program_file, programs
from gantry.status import ExitStatus

NAME = "run-local"
HELP = "run your project's image here as one node runs it (its environment, working folder, --sync folders), as you"
DESCRIPTION = f"""\
Run the image `make build-train PROJECT=DIR ARGS=--no-push` built of the project's current version on this machine,
with what a node gives the command: the same `docker run` as a node's agent (launch_contract's environment for node 0
of 1, GANTRY_RUN_DIR, the image's working folder {PROJECT_ROOT}), each --sync folder mounted from
runs/RUN_ID/sync/DIR, where `make fetch` puts a cloud run's, and --env, --shm-size and --max-minutes as on a node.
It runs as you (your uid and gid), so what it writes is yours. In the foreground: its output is this terminal's and
Ctrl-C reaches it as a stop reaches it on a node. Nothing bills; nothing of Google is asked.

examples:
  gantry run-local --project ../my-trainer --sync checkpoints -- python train.py --iterations 2
  make run-local PROJECT=examples/chess_selfplay ARGS="--sync checkpoints -- python scripts/train_multi_gpu.py --iterations 1"
"""


def add_arguments(parser) -> None:
    parser.add_argument("--project", type=Path, required=True, metavar="DIR", help="your project's folder, whose "
                        "image `make build-train PROJECT=DIR ARGS=--no-push` built")
    parser.add_argument("--gpu", action="store_true", help="its CUDA image (make build-train ARGS=\"--gpu --no-push\"),"
                        " with every GPU of this machine (docker run --gpus all: the NVIDIA container toolkit)")
    parser.add_argument("--sync", action="append", default=[], metavar="DIR", help="a folder the program writes "
                        "(relative to its working directory), kept in runs/RUN_ID/sync/DIR (repeatable)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="an environment variable "
                        "for the program (repeatable)")
    parser.add_argument("--shm-size", default="", metavar="SIZE", help="the container's /dev/shm (default 4g)")
    parser.add_argument("--max-minutes", type=float, default=0.0, metavar="N", help="stop it after N minutes, as a "
                        "node would (GANTRY_DEADLINE; default 0: no limit here)")
    parser.add_argument("--run-id", default="", help="its folder under runs/ (default: run-YYYYmmdd-HHMMSS)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the command and its arguments, as for gantry run")


def run(args, env) -> ExitStatus:
    program, declared = programs.resolve(args.command, args.project)
    if not program.command:
        raise GantryError("run-local runs a command (python ..., bash ...), and torchrun's `-m MODULE` or SCRIPT.py "
                          "is what gantry run starts under torchrun", "Give the command itself after --: "
                          "-- torchrun --nproc-per-node=1 -m MODULE ARGS, or -- python SCRIPT.py ARGS.")
    sync = programs.sync_folders([*(declared.sync if declared else ()), *args.sync], args.project)
    limits = programs.check_launch(args.max_minutes, 0.0, args.env, args.shm_size)
    flavour = "cuda" if args.gpu else "cpu"
    image = projects.local_ref(args.project, flavour)
    if not images.image_exists(image):
        raise GantryError(f"no image {image} here (the project's current version)",
                          f"Build it first: `make build-train PROJECT={args.project} ARGS=\"{'--gpu ' if args.gpu else ''}"
                          "--no-push\"` (each commit or edit is a new version).")
    run_id = launches.check_run_id(args.run_id or launches.new_run_id())
    if declared is not None:
        program_file.run_check(declared, programs.flags_of(args.command))
    folder = (Path("runs") / run_id).resolve()
    folder.mkdir(parents=True, exist_ok=True)  # yours: the container writes into it as you
    spec = RunSpec(run_id=run_id, image=image, node_rank=0, nnodes=1, master_addr="127.0.0.1",
                   args=program.words, command=True, gpu=args.gpu, sync=sync, sync_seconds=DEFAULT_SYNC_SECONDS,
                   run_dir=folder.as_uri(), launched_at=f"{time.time():.3f}", **limits)
    env.say(f"Running {image} here as node 0 of 1, as uid {os.getuid()}; nothing bills. Run folder: {folder}",
            program.describe(spec.run_dir))
    for name in sync:
        env.say(f"Sync: {name}/ is {folder}/sync/{name}, as `make fetch` brings a cloud run's node-N/{name}")
    done = subprocess.run([sys.executable, "-m", "gantry_agent.local", spec.to_json(), str(folder)],
                          env={**env.environ, "PYTHONPATH": os.pathsep.join(
                              filter(None, [str(images.REPO_ROOT / "packages"), env.environ.get("PYTHONPATH", "")]))},
                          check=False)
    env.say(f"Run {run_id} exited {done.returncode}; its folder: {folder}")
    return ExitStatus.OK if done.returncode == 0 else ExitStatus.ERROR
