"""What `gantry run` puts on the nodes, judged on the laptop before anything starts: the words after `--` sorted
into flags for the program gantry.yaml declares (program_file), a torchrun program or a plain command, and with
--project the checks of the command, the --sync folders and the --stats file against the project's folder.

    gantry run --project ../mine -- --epochs 3                 flags for gantry.yaml's command (each starts with -)
    gantry run --sync out -- -m toytrain.train --steps 200     torchrun program: -m MODULE ARGS
    gantry run -- train.py --steps 200                         torchrun program: SCRIPT.py ARGS
    gantry run --project ../mine -- python train.py --gpus all plain command, run as given in the image's WORKDIR
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from launch_contract import (
    DEFAULT_MASTER_PORT,
    EVERY_CONTAINER_ENV,
    MASTER_PORTS,
    MAX_NPROC_PER_NODE,
    PROJECT_ROOT,
    RUN_DIR_ENV,
    check_env_pair,
    check_relative,
)

from gantry.config import DEFAULT_RUN_MAX_MINUTES, MAX_MINUTES_FLAG
from gantry.errors import GantryError
from gantry.launches import program_file

TORCHRUN, COMMAND = "torchrun", "command"
PYTHON = program_file.PYTHON  # python, python3, python3.12: the scripts a project check can see


@dataclass(frozen=True)
class Program:
    """Your own program: ``kind`` TORCHRUN (torchrun runs ``words``) or COMMAND (``words`` run as given)."""

    kind: str
    words: tuple[str, ...]

    @property
    def torchrun(self) -> bool:
        return self.kind == TORCHRUN

    @property
    def command(self) -> bool:
        return self.kind == COMMAND

    def describe(self, run_url: str) -> str:
        names = ", ".join(name for name in EVERY_CONTAINER_ENV if name != RUN_DIR_ENV)
        if self.torchrun:
            return f"Program: torchrun {shlex.join(self.words)} (rendezvous at node 0; {RUN_DIR_ENV}={run_url})"
        return (f"Command: {shlex.join(self.words)}, run as given in the image's working directory on every node "
                f"(no torchrun); it gets {names} and {RUN_DIR_ENV}={run_url}")


def classify(after_dashes: list[str]) -> Program | None:
    """The words after `--` as a program, or None when they are flags for the program gantry.yaml declares (each
    one starts with -, as --epochs=3 does). `-m MODULE ARGS` and `SCRIPT.py ARGS` run under torchrun; any other
    first word (python, bash, ./run.sh, accelerate, ...) is a plain command."""
    words = after_dashes[1:] if after_dashes[:1] == ["--"] else list(after_dashes)
    if after_dashes[:1] == ["--"] and not words:
        raise GantryError("the command after -- is empty", "Name your program after it (gantry run -- -m "
                          "PACKAGE.MODULE ARGS, or -- python train.py ARGS), or leave -- out to run the program "
                          "gantry.yaml declares.")
    if not words or (words[0].startswith("-") and words[0] != "-m"):
        return None
    if words[0] == "-m" and (len(words) < 2 or words[1].startswith("-")):
        raise GantryError("-m names no module", "Write the module after it: gantry run -- -m PACKAGE.MODULE ARGS.")
    kind = TORCHRUN if words[0] == "-m" or words[0].endswith(".py") else COMMAND
    return Program(kind, tuple(words))


def flags_of(after_dashes: list[str]) -> list[str]:
    """The words after -- as flags for the program gantry.yaml declares."""
    return list(after_dashes[1:] if after_dashes[:1] == ["--"] else after_dashes)


def resolve(after_dashes: list[str], project: Path | None) -> tuple[Program, program_file.ProgramFile | None]:
    """What every node runs (and run-local runs here): the program after --, or, when only flags follow it, the
    command the project's gantry.yaml declares (the kit's, without a project) with the flags appended, and the file.
    With a project, its folder and the script the command names are checked (check_project)."""
    program = classify(after_dashes)
    declared = None
    if program is None:
        folder = project if project is not None else program_file.KIT_ROOT
        if project is not None and not project.is_dir():
            check_project(project, None)  # its one line: not a folder
        declared = program_file.load(folder)
        if declared is None:
            raise GantryError(f"nothing to run: no command after -- and no {program_file.FILE_NAME} in {folder}",
                              f"Put the command after --: -- python train.py ARGS, or declare it in "
                              f"{folder / program_file.FILE_NAME} (command: python train.py).")
        program = Program(COMMAND, (*declared.command, *flags_of(after_dashes)))
    if project is not None:
        check_project(project, program)
    return program, declared


def script_of(program: Program) -> str | None:
    """The script file a program names: torchrun's SCRIPT.py, or python's SCRIPT in `python [OPTIONS] SCRIPT`;
    None for a module (-m), code (-c) or any other command."""
    words = program.words
    if program.torchrun:
        return None if words[0] == "-m" else words[0]
    if not PYTHON.fullmatch(Path(words[0]).name):
        return None
    options = iter(words[1:])
    for word in options:
        if word.startswith(("-m", "-c")) or word == "-":
            return None
        if word in ("-W", "-X"):  # the options that take a value as the next word
            next(options, None)
        elif not word.startswith("-"):
            return word
    return None


def relative_path(path: str, what: str, flag: str, project: Path | None = None) -> str:
    """A --sync folder or --stats file as the spec carries it: relative to the program's working directory and inside
    it; with --project, refused in one line unless it stays inside the project's folder once symlinks and .. are
    resolved (it need not exist yet: the program may make it)."""
    try:
        relative = check_relative(path, what)
    except ValueError as error:
        raise GantryError(str(error), f"Give {flag} a path relative to the program's working directory "
                          f"({flag} outputs).") from None
    if project is not None:
        root = project.resolve()
        if not (root / relative).resolve().is_relative_to(root):
            raise GantryError(f"{what} {path!r} leads outside the project {project} (a symlink)",
                              f"Name a path inside {project} for {flag}.")
    return relative


def sync_folders(paths: list[str], project: Path | None = None) -> tuple[str, ...]:
    """The --sync folders as the spec carries them: each relative and inside the project (relative_path), a name given
    twice once, none inside another (each is its own mount on the node), and, with --project, none a file there."""
    folders: list[str] = []
    for path in paths:
        folder = relative_path(path, "sync folder", "--sync", project)
        if project is not None and (project / folder).is_file():
            raise GantryError(f"--sync {path} is a file in the project {project}; the node keeps folders",
                              f"Name the folder the program writes it in (--sync {Path(folder).parent.as_posix()}).")
        if folder in folders:
            continue
        inside = next((f for f in folders if folder.startswith(f + "/") or f.startswith(folder + "/")), None)
        if inside is not None:
            raise GantryError(f"--sync {folder} and --sync {inside} overlap (one holds the other)",
                              "Name only the outer folder: it is copied whole.")
        folders.append(folder)
    return tuple(folders)


def check_project(project: Path, program: Program | None) -> None:
    """--project runs your command in an image of the folder: the folder exists, the command is given, and the script
    a command names is a file in it (the image's WORKDIR, PROJECT_ROOT, holds the folder)."""
    if not project.is_dir():
        raise GantryError(f"--project {project} is not a folder", "Name your project's folder (make run-gcp "
                          "PROJECT=../my-trainer ARGS=\"-- python train.py\").")
    if program is None:
        return  # gantry.yaml's command, checked once resolved (cli/run.resolve_program)
    script = script_of(program)
    if script is None:
        return
    relative = script.removeprefix(PROJECT_ROOT + "/") if script.startswith("/") else script
    if relative.startswith("/"):
        return  # a file elsewhere in the image (/opt/...): the laptop cannot see it
    target = (project / relative).resolve()
    if not target.is_relative_to(project.resolve()) or not target.is_file():
        raise GantryError(f"{script} is not a file in the project {project}",
                          f"Name the script by its path inside {project} (the image's working directory, "
                          f"{PROJECT_ROOT}).")


SHM_SIZE = re.compile(r"[1-9][0-9]*[bkmg]?")  # docker run --shm-size: a number and a unit (b, k, m, g)


def gpu_ids(text: str) -> tuple[int, ...]:
    """--gpu-ids 0,1 as indices; "" or all: every GPU of the node (())."""
    if text in ("", "all"):
        return ()
    try:
        ids = tuple(int(part) for part in text.split(","))
    except ValueError:
        ids = (-1,)
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise GantryError(f"--gpu-ids {text!r} is not a list of GPU indices",
                          "Give the node's GPUs by index, e.g. --gpu-ids 0,1, or leave it out (every GPU).")
    return ids


def check_resources(cpus: float, ids: tuple[int, ...], deployment) -> None:
    """--cpus and --gpu-ids against the nodes the deployment has (its tfvars, as applied): what docker on a node
    would refuse (more CPUs than it has, a GPU it lacks), refused here. ``deployment`` None: unknown, not checked."""
    if deployment is None:
        return
    if ids and not deployment.use_gpu:
        raise GantryError(f"--gpu-ids {','.join(map(str, ids))} on nodes without GPUs",
                          "Drop it, or set use_gpu = true in infra/terraform.tfvars and `make apply`.")
    if ids and max(ids) >= deployment.accelerator_count:
        raise GantryError(f"--gpu-ids {','.join(map(str, ids))} names a GPU the nodes lack: each has "
                          f"{deployment.accelerator_count} (0 to {deployment.accelerator_count - 1})",
                          "Name those, or raise accelerator_count in infra/terraform.tfvars and `make apply`.")
    found = re.search(r"-(\d+)$", deployment.machine_type or "")
    if found and cpus > int(found.group(1)):
        raise GantryError(f"--cpus {cpus:g} is more than a {deployment.machine_type} node has ({found.group(1)} "
                          "vCPUs)", f"Give at most {found.group(1)}, or leave it out (all of them).")


def check_launch(max_minutes: float | None, stall_minutes: float, env: list[str], shm_size: str,
                 master_port: int = DEFAULT_MASTER_PORT, nproc_per_node: int = 0, cpus: float = 0.0,
                 gpus: str = "") -> dict:
    """The launch's own settings (gantry run's, run-local's), each refused in one line before anything is asked of
    Google: what launch_specs takes as max_minutes (None: the default), stall_minutes, env, shm_size, cpus and
    gpu_ids."""
    limit = DEFAULT_RUN_MAX_MINUTES if max_minutes is None else max_minutes
    for flag, value in ((MAX_MINUTES_FLAG, limit), ("--stall-minutes", stall_minutes)):
        if not 0 <= value < 1e7:
            raise GantryError(f"{flag} {value:g} is not a number of minutes", f"Give {flag} 0 (none) or more.")
    if master_port not in MASTER_PORTS:
        raise GantryError(f"--master-port {master_port} is not a port the program can listen on",
                          f"Give a port from {MASTER_PORTS.start} to {MASTER_PORTS.stop - 1} (default "
                          f"{DEFAULT_MASTER_PORT}).")
    if not 0 <= nproc_per_node <= MAX_NPROC_PER_NODE:
        raise GantryError(f"--nproc-per-node {nproc_per_node} is not a number of ranks per node",
                          f"Give 1 to {MAX_NPROC_PER_NODE}, or leave it out (0: one per GPU, else 1).")
    for pair in env:
        try:
            check_env_pair(pair)
        except ValueError as error:
            raise GantryError(f"--env {error}", "Write --env KEY=VALUE, e.g. --env WANDB_MODE=offline.") from None
    if shm_size and not SHM_SIZE.fullmatch(shm_size.lower()):
        raise GantryError(f"--shm-size {shm_size!r} is not a size docker takes",
                          "Give a number with b, k, m or g, e.g. --shm-size 16g.")
    if not 0 <= cpus < 1e4:
        raise GantryError(f"--cpus {cpus:g} is not a number of CPUs", "Give a positive number (1.5 is fine), or "
                          "leave it out (all of the node's).")
    return {"max_minutes": limit, "stall_minutes": stall_minutes, "env": tuple(env),
            "shm_size": shm_size.lower(), "cpus": cpus, "gpu_ids": gpu_ids(gpus)}


# What ray.init() may not be given when it joins a running cluster: Ray raises "When connecting to an existing
# cluster, num_cpus and num_gpus must not be provided." (ray/_private/worker.py, init), and so for the others.
RAY_INIT_LOCAL_ONLY = ("num_cpus", "num_gpus", "resources", "labels", "object_store_memory", "_system_config")
SKIPPED_FOLDERS = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages"}


def ray_init_refusals(project: Path, limit: int = 5000) -> list[str]:
    """FILE:LINE ray.init(NAME=...) for each call in the project's Python files that Ray refuses once RAY_ADDRESS
    names a cluster (muzero-general's `ray.init(num_gpus=total_gpus)`): node 0 would crash-loop on it. A call
    under an `if` that tests RAY_ADDRESS is the project's own choice between a cluster and this machine."""
    found = []
    for path in sorted(project.rglob("*.py"))[:limit]:
        if SKIPPED_FOLDERS & set(path.relative_to(project).parts):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue
        guarded = {id(inner) for node in ast.walk(tree) if isinstance(node, (ast.If, ast.IfExp))
                   and "RAY_ADDRESS" in ast.dump(node.test) for inner in ast.walk(node)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "init"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "ray"
                    and id(node) not in guarded):  # a call made only when RAY_ADDRESS says so knows the cluster
                names = [k.arg for k in node.keywords if k.arg in RAY_INIT_LOCAL_ONLY]
                if names:
                    found.append(f"{path.relative_to(project)}:{node.lineno} ray.init({', '.join(names)}=...)")
    return found


def check_ray(program: Program, project: Path | None) -> None:
    """--ray (or gantry.yaml's ray: true), judged here: node 0 runs a plain command in the cluster, and the
    project's ray.init() calls can join one."""
    if not program.command:
        raise GantryError("--ray runs a plain command on node 0, in the Ray cluster; -m MODULE and SCRIPT.py are "
                          "torchrun programs", f"Give the command itself: -- python {shlex.join(program.words)}.")
    refusals = ray_init_refusals(project) if project is not None and project.is_dir() else []
    if refusals:
        raise GantryError(f"--ray: {'; '.join(refusals)}: Ray refuses these when ray.init() joins a running cluster "
                          "(\"When connecting to an existing cluster, num_cpus and num_gpus must not be provided\"), "
                          "so node 0 would crash-loop", "Drop them (the cluster counts each node's CPUs and GPUs), or "
                          "pass them only when RAY_ADDRESS is unset; nothing was started.")


def ray_in_image(image: str) -> str:
    """The image's `ray` (node 0 starts the head with it), asked only where this machine's engine holds the image
    (the build left it here): its path, or "" when it could not look; refused when the image has none."""
    if not image:
        return ""
    try:
        import docker
        from gantry import images  # the engine: only a Ray launch asks it
    except ImportError:
        return ""
    try:
        if not images.image_exists(image):
            return ""
        found = images.docker_client().containers.run(image, ["-c", "command -v ray"], entrypoint="sh", remove=True)
    except docker.errors.ContainerError:
        raise GantryError(f"--ray: the image {image} has no `ray` command (node 0 starts the Ray head with it)",
                          "Add ray to the project's requirements (ray[default] or ray==VERSION) and build it again "
                          "(make build-train PROJECT=DIR); nothing was started.") from None
    except (GantryError, docker.errors.DockerException):
        return ""  # no engine here, or it could not run the image: the node's head says so in `make status`
    return found.decode(errors="replace").strip()
