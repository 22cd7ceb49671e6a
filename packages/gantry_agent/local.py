"""One node on this machine: `python -m gantry_agent.local SPEC_JSON RUN_FOLDER` runs a run spec's container in the
foreground with the `docker run` a node's agent would use (containers.docker_run_args: the contract's environment,
the image's working folder, the --sync folders mounted from RUN_FOLDER/sync), as this machine's user, so what the
program writes is the user's. `gantry run-local` (make run-local) calls it as a program, as the launcher must not
import the agent (tests/unit/test_layering.py). Ctrl-C reaches the program, which checkpoints as on a node."""

from __future__ import annotations

import os
import subprocess
import sys

from launch_contract import RunSpec

from .containers import Docker, docker_run_args
from .settings import Settings
from .sync import local_folder


def local_run_args(spec: RunSpec, run_folder: str, settings: Settings, workdir: str, user: str) -> list[str]:
    """docker_run_args in the foreground (no -d: the output is this terminal's), removed at its end, as ``user``."""
    args = docker_run_args(spec, run_folder, settings, workdir)
    if args[:2] != ["run", "-d"]:
        raise RuntimeError(f"docker_run_args begins {args[:2]}, not run -d")
    return ["run", "--rm", "--user", user, *args[2:]]


def main(argv: list[str]) -> int:
    spec, run_folder = RunSpec.from_json(argv[0]), argv[1]
    settings = Settings(os.environ)
    docker = Docker(settings.docker)
    workdir = docker.workdir(spec.image)
    for folder in spec.sync:  # made here, as this user: docker would make a missing one root's
        os.makedirs(local_folder(run_folder, folder), exist_ok=True)
    user = f"{os.getuid()}:{os.getgid()}"
    try:
        return subprocess.run([*settings.docker, *local_run_args(spec, run_folder, settings, workdir, user)],
                              check=False).returncode
    except KeyboardInterrupt:  # docker run passed the signal on; its container is --rm
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
