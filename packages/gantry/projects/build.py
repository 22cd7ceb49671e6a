"""`gantry build --project DIR`: an image of your own project folder, one that knows nothing of Gantry, in the
deployment's flavour (cpu: CPU torch; cuda: docker/torch.json's CUDA torch).

Kinds, the first found wins (--dockerfile PATH names one of the project's own anywhere in it):
  Dockerfile        yours, used as is; a pytorch/pytorch base of the wrong build refused before, and after the build
                    a check that `python` and the flavour's torch are inside
  pyproject.toml    [project].dependencies in their own layer, then the code and `pip install --no-deps .` (one
                    without a [project] table beside a requirements.txt is a tools' file: the next kind wins)
  requirements.txt  its requirements in their own layer, then the code
Before anything is built, gantry.projects.resolve asks pip whether every requirement has a wheel for the image's
Python and platform, and refuses, naming each one that has not.
gantry.projects.dockerfile writes the two generated kinds' Dockerfile: docker/Dockerfile's own first steps, verbatim,
up to its torch step, so the engine's cache reuses the torch layer the kit's image built; then the dependencies
under a constraint that holds torch at the image's; then the project in launch_contract.PROJECT_ROOT, its WORKDIR,
owned by and run as uid 1000 (the node agent hands the run folder to the image's numeric user). No ENTRYPOINT: the
agent runs the command given to `gantry run` as is.

The context is a tar of our own: the kit's torch inputs at their docker/ paths (as in the kit's context), the
generated Dockerfile and requirement files under gantry/, the project's files under project/. Nothing is ever
written into the project. Every build's full output goes to a log of its own,
~/.cache/gantry/builds/NAME-FLAVOUR-YYYYmmdd-HHMMSS.log (the newest KEPT_LOGS of a project and flavour are kept).
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from gantry import images, projects
from gantry.errors import GantryError
from gantry.projects import apt as project_apt
from gantry.projects import context as project_context
from gantry.projects import pins as project_pins
from gantry.projects import resolve as project_resolve
from gantry.projects.dockerfile import (
    GENERATED,
    IMAGE_USER,
    IN_CONTEXT,
    KIT_INPUTS,
    TORCH_STEP,
    dockerfile,
    kind,
)

context_files = project_context.context_files


def dependency_lines(project: Path, kind: str) -> list[project_pins.Line]:
    return project_pins.requirement_lines(project) if kind == "requirements.txt" else \
        project_pins.pyproject_lines(project)


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def build_context(context: project_context.Context, kind: str, pins: dict, wheels: Iterable[Path] = (),
                  ca_certs: Iterable[Path] = (), root: Path = images.REPO_ROOT, own_dockerfile: str = "Dockerfile",
                  packages: tuple[str, ...] = project_apt.ALWAYS, python: str = project_pins.DEFAULT_PYTHON):
    """The tar the engine gets (see the module's docstring); for a Dockerfile of the project's own, its files and
    that Dockerfile (at its path in the project), whatever the ignore files say of it."""
    from docker.utils.build import create_archive

    project = context.project
    archive = tempfile.NamedTemporaryFile(prefix="gantry-project-", suffix=".tar")  # noqa: SIM115 (returned)
    if kind == "Dockerfile":
        names = [str(p.relative_to(project)) for p in context.files]
        create_archive(str(project), files=sorted(set(names) | {own_dockerfile}), fileobj=archive)
        archive.seek(0)
        return archive
    kit = [p for p in images.context_paths(root, images.DOCKERFILES["cpu"])
           if p == "docker" or p.startswith(KIT_INPUTS)]
    create_archive(str(root), files=kit, fileobj=archive)  # as the kit's context has them: same paths, same modes
    lines = dependency_lines(project, kind)
    with tarfile.open(fileobj=archive, mode="a") as tar:
        images.add_wheels_and_certs(tar, wheels, ca_certs)
        _add_text(tar, f"{GENERATED}/Dockerfile", dockerfile(kind, bool(lines), root, packages, python))
        if lines:
            _add_text(tar, f"{GENERATED}/deps/torch-constraint.txt", project_pins.constraint(pins))
            if kind == "requirements.txt":
                for name in project_pins.included_files(lines):
                    tar.add(project / name, arcname=f"{GENERATED}/deps/{IN_CONTEXT}/{name}", recursive=False)
            else:
                _add_text(tar, f"{GENERATED}/deps/{IN_CONTEXT}/requirements.txt",
                          "".join(line.text + "\n" for line in lines))
        for path in context.files:
            tar.add(path, arcname=f"{IN_CONTEXT}/{path.relative_to(project).as_posix()}", recursive=False)
    archive.seek(0)
    return archive


# ---- the engine ----------------------------------------------------------------------------------------------

KEPT_LOGS = 20  # build logs of one project and flavour: a failed build's log outlives the next builds
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # colour and cursor codes (pip's rich output, BuildKit's)
ERROR_LINE = re.compile(r"^(ERROR|error|Error|E:|fatal)\b|\b(Error|error):\s")


def log_path(project: Path, flavour: str, at: float | None = None) -> Path:
    """The log of a build that starts at ``at`` (now): one file a build, so the next build of the same project
    cannot overwrite a failure's log."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if at is None else at))
    return cache / "gantry" / "builds" / f"{projects.name(project)}-{flavour}-{stamp}.log"


def prune_logs(log: Path, keep: int = KEPT_LOGS) -> None:
    """Keep the newest ``keep`` logs of the project and flavour ``log`` belongs to."""
    stem = log.name[:-len("-YYYYmmdd-HHMMSS.log")]
    for old in sorted(log.parent.glob(f"{stem}-*.log"))[:-keep]:
        old.unlink(missing_ok=True)


def first_error(printed: list[str]) -> str | None:
    """The first line of a failed step's output that says what went wrong (pip's `ERROR: ...`, a compiler's
    `error: ...`), its escape codes gone; None when no line says so."""
    for line in printed:
        text = ANSI.sub("", line).strip()
        if ERROR_LINE.search(text):
            return text
    return None


def cached_steps(lines: list[str]) -> dict[str, bool]:
    """Each step of a classic-builder output (``Step 3/9 : RUN ...``) and whether the engine took it from its
    cache (`` ---> Using cache``)."""
    steps: dict[str, bool] = {}
    current = None
    for line in lines:
        if line.startswith("Step ") and " : " in line:
            current = line.split(" : ", 1)[1].strip()
            steps[current] = False
        elif current and line.strip() == "---> Using cache":
            steps[current] = True
    return steps


@dataclass
class Built:
    tag: str
    image_id: str
    seconds: float
    steps: dict  # cached_steps of its output

    def torch_reused(self) -> bool | None:
        """Whether the torch step came from the engine's cache (None: no such step, the project's Dockerfile)."""
        found = [cached for step, cached in self.steps.items() if step.startswith(TORCH_STEP)]
        return found[0] if found else None


def run_build(context, dockerfile_name: str, tag: str, build_args: dict, log: Path,
              progress: Callable[[str], None], network_mode: str | None = "host", nocache: bool = False) -> Built:
    """Build through the docker SDK; every line to ``progress`` and the log; a failure names the failing step and
    the log in one line."""
    import docker

    client = images.docker_client()
    log.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    step, step_start, image_id, start = "", 0, None, time.monotonic()
    with log.open("w") as out:
        stream = client.api.build(fileobj=context, custom_context=True, dockerfile=dockerfile_name, tag=tag,
                                  buildargs={k: str(v) for k, v in build_args.items()}, decode=True, rm=True,
                                  forcerm=True, pull=False, nocache=nocache, network_mode=network_mode,
                                  platform=images.PLATFORM)
        try:  # the stream raises a Dockerfile the engine refuses before any step (a parse error) as it starts
            for chunk in stream:
                if "error" in chunk:
                    out.write(chunk["error"] + "\n")
                    error = ANSI.sub("", (chunk["error"].strip().splitlines() or ["unknown error"])[-1])
                    # a RUN that failed: its first error line (pip's ERROR: ...) says more than the engine's exit code
                    printed = [ANSI.sub("", line).strip() for line in lines[step_start:]]
                    printed = [line for line in printed if line and not line.startswith(
                        ("---> ", "Removing intermediate container", "Step "))]
                    said = (first_error(printed) or (printed[-1] if printed else error)) \
                        if "returned a non-zero code" in error else error
                    where = f"at {step}" if step else "before its first step"
                    raise images.ImageBuildError(f"building {tag} failed {where}: {said[:200]}",
                                                 f"The full build log is {log}")
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                for line in chunk.get("stream", "").splitlines():
                    out.write(line + "\n")
                    lines.append(line)
                    if line.startswith("Step ") and " : " in line:
                        step_start = len(lines)
                        number, instruction = line.split(" : ", 1)
                        step = f"step {number.split()[1]} ({instruction[:100]})"
                    if line.strip():
                        progress(line)
        except docker.errors.APIError as refused:
            said = " ".join(str(refused.explanation or refused).split())
            out.write(said + "\n")
            raise images.ImageBuildError(f"{dockerfile_name} cannot be built: {said[:200]}",
                                         "Fix that line of it; nothing was built") from None
    image = client.images.get(tag)
    return Built(tag, image_id or image.id, time.monotonic() - start, cached_steps(lines))


TORCH_PROBE = "import sys, torch; print(torch.__version__, torch.version.cuda)"


def check_torch(tag: str, flavour: str, pins: dict) -> str:
    """A project's own Dockerfile: `python` and the flavour's torch must be in the image; one line when not."""
    import docker

    source = f"PyPI's, the CUDA {pins['cuda']} build" if flavour == "cuda" else f"from {pins['cpu_index_url']}"
    fix = (f"Install torch=={pins['torch']} ({source}) in your Dockerfile, or remove the Dockerfile and list your "
           f"packages in requirements.txt: gantry then adds the flavour's torch")
    # created, then started: a start that fails (no `python`) must not leave the container behind
    container = images.docker_client().containers.create(tag, entrypoint=["python", "-c", TORCH_PROBE],
                                                          network_mode="none", user=IMAGE_USER)
    try:
        try:
            container.start()
        except docker.errors.APIError as e:
            raise GantryError(f"{tag} has no `python` to run ({str(e.explanation or e)[:160]})",
                              "Put python on the image's PATH (the agent runs your command as given)") from None
        status = container.wait(timeout=600).get("StatusCode")
        output = container.logs(stdout=True, stderr=False)
        if status != 0:
            said = container.logs(stdout=False, stderr=True).decode(errors="replace").strip().splitlines()
            raise GantryError(f"{tag} has no torch its python can import ({said[-1] if said else status})", fix)
    finally:
        container.remove(force=True)
    version, cuda = output.decode().split()[-2:]
    cuda = None if cuda == "None" else cuda
    if flavour != "cuda" and cuda is not None:
        raise GantryError(f"{tag} holds torch {version}, a CUDA {cuda} build, but the deployment is {flavour}",
                          f"Take the CPU torch from {pins['cpu_index_url']} in your Dockerfile")
    if flavour == "cuda" and (cuda is None or ".".join(cuda.split(".")[:2]) != pins["cuda"]):
        raise GantryError(f"{tag} holds torch {version} built for CUDA {cuda}, but the nodes need CUDA "
                          f"{pins['cuda']} (docker/torch.json)", fix)
    return f"torch {version}" + (f" (CUDA {cuda})" if cuda else " (CPU)")


def own_dockerfile(project: Path, path: Path | None) -> str | None:
    """--dockerfile PATH as the engine takes it (a path inside the project, relative to it); None without one."""
    if path is None:
        return None
    target = (project / path).resolve() if not path.is_absolute() else path.resolve()
    if not target.is_relative_to(project.resolve()) or not target.is_file():
        raise GantryError(f"--dockerfile {path} is not a file in the project {project}",
                          "Name the Dockerfile by its path inside the project, e.g. --dockerfile docker/Dockerfile.gpu")
    return target.relative_to(project.resolve()).as_posix()


PYTORCH_TAG = re.compile(r"^(\d+\.\d+(?:\.\d+)?)-cuda(\d+\.\d+)")  # pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime


def check_own_dockerfile(text: str, name: str, flavour: str, pins: dict, args: dict) -> list[str]:
    """What a project's own Dockerfile says before it is built: a base image whose torch the check after the build
    would refuse (pytorch/pytorch's tags name torch and its CUDA) is refused now; the lines to say (BASE_IMAGE given
    to a Dockerfile that declares no ARG BASE_IMAGE, and so ignores it)."""
    froms = [line.split()[1] for line in text.splitlines() if line.strip().upper().startswith("FROM ")
             and len(line.split()) > 1]
    base = froms[-1] if froms else "(none)"
    image, _, tag = base.rpartition(":") if ":" in base.rsplit("/", 1)[-1] else (base, "", "")
    said = []
    if "BASE_IMAGE" in args and not re.search(r"^\s*ARG\s+BASE_IMAGE\b", text, re.MULTILINE | re.IGNORECASE):
        said.append(f"gantry: BASE_IMAGE={args['BASE_IMAGE']} is not used: {name} declares no ARG BASE_IMAGE, so its "
                    f"own FROM {base} is the base")
    built = PYTORCH_TAG.match(tag) if image.endswith("pytorch/pytorch") else None
    if built:
        torch, cuda = built.groups()
        wrong = f"a CUDA {cuda} build, and the {flavour} nodes need the CPU torch" if flavour != "cuda" else \
            f"built for CUDA {cuda}, and the nodes need CUDA {pins['cuda']} (docker/torch.json)" \
            if cuda != pins["cuda"] else ""
        if wrong:
            raise GantryError(f"{name} builds FROM {base}: torch {torch} {wrong}",
                              f"Install torch=={pins['torch']} on a base of your choice in {name}, or drop the "
                              "Dockerfile and list your packages in requirements.txt (gantry adds the flavour's "
                              "torch); nothing was built")
    return said


def require_base(base: str, python: str) -> None:
    """The base a project's Python asks for, here or pulled now: where it cannot be had (no Docker Hub from here),
    one line naming the BASE_IMAGE to give instead, before anything is built."""
    import docker

    client = images.docker_client()
    try:
        client.images.get(base)
        return
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.pull(base)
    except docker.errors.DockerException as error:
        reason = " ".join(str(getattr(error, "explanation", None) or error).split())[:160]  # the engine's words
        raise GantryError(f"the base {base}, for the project's Python {python}, cannot be pulled here ({reason})",
                          f"Name a Debian bookworm image with Python {python} and its venv module, a mirror's: "
                          f"make build-train BASE_IMAGE=REGISTRY/python:{python}-slim-bookworm (gantry build "
                          f"--base-image), or ask for {project_pins.DEFAULT_PYTHON}; nothing was built") from None


def build(project: Path, flavour: str, progress: Callable[[str], None] = print, *,
          max_context_mb: float = project_context.DEFAULT_MAX_CONTEXT_MB, build_args: dict | None = None,
          wheel_dir: Path | None = None, ca_certs: Iterable[Path] = (), network_mode: str | None = "host",
          nocache: bool = False, dockerfile: Path | None = None) -> Built:
    """Check, then build ``project`` as projects.local_ref(project, flavour); the checks refuse before anything is
    sent (see the module's docstring). ``dockerfile``: a Dockerfile of the project's own at that path in it."""
    own = own_dockerfile(project, dockerfile)
    found = "Dockerfile" if own else kind(project)
    own = own or "Dockerfile"
    pins = images.torch_pins()
    if flavour == "tpu" and found != "Dockerfile":
        raise GantryError(f"{project} has a {found}, and gantry builds such a project for cpu and cuda only",
                          "Build with --cpu or --gpu, or add a Dockerfile of your own that installs torch_xla")
    packages, python = (), project_pins.DEFAULT_PYTHON  # a Dockerfile of the project's own: its own to choose
    if found != "Dockerfile":
        project_pins.check(project, found, flavour, pins)
        project_resolve.refuse_uninstallable(dependency_lines(project, found))
        packages = project_apt.check(project, progress)  # Debian's index, read once a week
        python = project_pins.image_python(project)
    else:
        for name in (project_apt.APT_FILE, project_pins.PYTHON_FILE):
            if (project / name).is_file():
                progress(f"gantry: {name} is not read: your Dockerfile makes the image")
    context = project_context.select(project)
    for line in context.summary():
        progress(line)
    context.check_size(max_context_mb)
    if found != "Dockerfile":  # last of the checks: it asks the package index
        for lock in project_resolve.lock_files(project):
            progress(f"gantry: {lock} is not read: the image installs {found}'s requirements (pin the versions you "
                     f"want there)")
        project_resolve.check(dependency_lines(project, found), pins, progress, python=python)
    tag = projects.local_ref(project, flavour)
    wheels = images.select_wheels(wheel_dir, flavour, pins) if found != "Dockerfile" else []
    certs = list(ca_certs) if found != "Dockerfile" else []
    args = dict(build_args or {})
    if found != "Dockerfile":
        args["FLAVOUR"] = flavour
        if python != project_pins.DEFAULT_PYTHON and "BASE_IMAGE" not in args:
            args["BASE_IMAGE"] = f"python:{python}-slim-bookworm"  # docker/Dockerfile's base, with that Python
            progress(f"gantry: Python {python} (the project asks for it): base {args['BASE_IMAGE']}, whose torch "
                     "layer is its own (the kit's image is 3.11)")
            require_base(args["BASE_IMAGE"], python)
    else:
        for line in check_own_dockerfile((project / own).read_text(errors="replace"), own, flavour, pins, args):
            progress(line)
    log = log_path(project, flavour)
    progress(f"gantry: building {tag} from {found} ({len(wheels)} local wheel(s), {len(certs)} extra CA "
             f"certificate(s)); log: {log}")
    with build_context(context, found, pins, wheels, certs, own_dockerfile=own, packages=packages,
                       python=python) as archive:
        try:
            built = run_build(archive, own if found == "Dockerfile" else f"{GENERATED}/Dockerfile", tag, args,
                              log, progress, network_mode, nocache)
        finally:
            prune_logs(log)
    if found == "Dockerfile":
        progress(f"gantry: {tag} holds {check_torch(tag, flavour, pins)}, as the {flavour} deployment needs")
    elif built.torch_reused():
        progress("gantry: torch's layer came from the engine's cache (the kit's image or an earlier build made it)")
    else:
        progress("gantry: torch installed in a new layer; the kit's image and later builds reuse it")
    return built
