"""The Dockerfile `gantry build --project` writes for a project with a pyproject.toml or a requirements.txt, and
the recipe's digest that the project's image tag carries (gantry.projects).

The generated Dockerfile starts with docker/Dockerfile's own first steps, verbatim, up to its torch step (same base,
build args, copied files and install_torch.sh), so the engine's cache reuses the torch layer the kit's image built;
then the dependencies under a constraint that holds torch at the image's; then the project in
launch_contract.PROJECT_ROOT. A project with a Dockerfile of its own is built from that, and no recipe of the kit's
goes into it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from launch_contract import PROJECT_ROOT

from gantry import images
from gantry.errors import GantryError
from gantry.projects import apt as project_apt
from gantry.projects import context as project_context
from gantry.projects import pins as project_pins

KINDS = ("Dockerfile", "pyproject.toml", "requirements.txt")
TORCH_STEP = "RUN sh /tmp/build/install_torch.sh"  # docker/Dockerfile's torch layer, the last step shared
DEPS_STEP = "RUN /opt/venv/bin/pip install"
# the kit's files that decide what the generated image holds; the certificates and local wheels beside them only
# decide how the build reaches PyPI, not what it installs
KIT_RECIPE = ("docker/install_torch.sh", "docker/torch_pins.py", "docker/torch.json")
KIT_INPUTS = ("docker/certs", "docker/wheels", *KIT_RECIPE)  # what the context carries at its docker/ paths
GENERATED = "gantry"  # the context's folder of what gantry writes
IN_CONTEXT = "project"  # the context's folder of the project's files
DEPS = "/tmp/deps"
IMAGE_USER = "1000:1000"  # the kit image's `trainer`


def has_project_table(project: Path) -> bool:
    import tomllib

    try:
        return "project" in tomllib.loads((project / "pyproject.toml").read_text())
    except (tomllib.TOMLDecodeError, OSError):
        return True  # read again, and refused in one line, where its dependencies are read


def has_kind(project: Path) -> bool:
    """Whether the folder holds one of KINDS at its root (kind() would find one); a missing folder is kind()'s to
    refuse."""
    return not project.is_dir() or any((project / name).is_file() for name in KINDS)


def kind(project: Path) -> str:
    """Which of KINDS the project has (the first found), or a one-line refusal naming the three."""
    if not project.is_dir():
        raise project_context.no_such_folder(project)
    for name in KINDS:
        if (project / name).is_file():
            if name == "pyproject.toml" and (project / "requirements.txt").is_file() and not has_project_table(project):
                continue  # a pyproject.toml for tools (ruff, Poetry): the requirements are in requirements.txt
            return name
    raise GantryError(f"{project} has no Dockerfile, pyproject.toml or requirements.txt, so nothing says what the "
                      f"image needs", "Add a requirements.txt listing the packages your code imports (or a "
                      "pyproject.toml, or a Dockerfile of your own)")


def kit_torch_steps(root: Path = images.REPO_ROOT) -> list[str]:
    """docker/Dockerfile's instructions up to and including its torch step, verbatim (comments dropped)."""
    steps: list[str] = []
    continued = False
    for line in (root / images.DOCKERFILES["cpu"]).read_text().splitlines():
        if not continued and (not line.strip() or line.lstrip().startswith("#")):
            continue
        steps.append(line)
        continued = line.endswith("\\")
        if line.startswith(TORCH_STEP) and not continued:
            return steps
    raise GantryError(f"{root / images.DOCKERFILES['cpu']} has no torch step ({TORCH_STEP})",
                      "Run from an unmodified Gantry checkout")


def python_check(python: str) -> str:
    """A first step that stops a build in seconds where the base's Python is not the one .python-version asks for."""
    return (f"RUN python3 -c \"import sys; v = '%d.%d' % sys.version_info[:2]; sys.exit(None if v == '{python}' else "
            f"'error: BASE_IMAGE has Python ' + v + ', {project_pins.PYTHON_FILE} asks for {python}')\"")


def dockerfile(kind: str, has_dependencies: bool, root: Path = images.REPO_ROOT,
               packages: tuple[str, ...] = project_apt.ALWAYS, python: str = project_pins.DEFAULT_PYTHON) -> str:
    """The generated Dockerfile of a pyproject.toml or requirements.txt project: layers from the least to the most
    often changed (torch, the Debian packages, the dependencies, the code). Another ``python`` than the kit's gets a
    check of the base's first (its torch layer is its own then: nothing is shared with the kit's image)."""
    requirements = f"{DEPS}/{IN_CONTEXT}/requirements.txt"
    steps = kit_torch_steps(root)
    if python != project_pins.DEFAULT_PYTHON:
        builder = next(n for n, line in enumerate(steps) if line.startswith("FROM "))
        steps.insert(builder + 1, python_check(python))
    lines = [f"# Generated by `gantry build --project` ({kind}); the kit's torch steps first (docker/Dockerfile).",
             *steps]
    if has_dependencies:
        lines += ["# The project's dependencies in their own layer; the constraint holds torch at the image's.",
                  f"COPY {GENERATED}/deps/ {DEPS}/",
                  f"{DEPS_STEP} -c {DEPS}/torch-constraint.txt -r {requirements} && rm -rf {DEPS}"]
    lines += ["", "FROM ${BASE_IMAGE}", "ARG FLAVOUR=cpu",
              ("ENV PATH=/opt/venv/bin:${PATH} PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 "
               "GANTRY_IMAGE_FLAVOUR=${FLAVOUR} NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility"),
              "# git, make and the project's apt.txt (gantry/projects/apt.py): the dev container is this image",
              project_apt.install_step(packages),
              (f"RUN useradd --create-home --uid 1000 --user-group trainer && mkdir -p {PROJECT_ROOT} "
               f"&& chown {IMAGE_USER} {PROJECT_ROOT}"),
              "COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
              "COPY --from=builder /opt/venv /opt/venv",
              f"WORKDIR {PROJECT_ROOT}",
              f"COPY --chown={IMAGE_USER} {IN_CONTEXT}/ {PROJECT_ROOT}/"]
    if kind == "pyproject.toml":  # from a copy: the build's own files (build/, *.egg-info) stay out of the WORKDIR
        lines.append(f"RUN cp -r {PROJECT_ROOT} /tmp/src && PIP_CERT=/etc/ssl/certs/ca-certificates.crt "
                     f"PIP_NO_CACHE_DIR=1 /opt/venv/bin/pip install --no-deps /tmp/src && rm -rf /tmp/src")
    lines.append(f"USER {IMAGE_USER}")
    return "\n".join(lines) + "\n"


def kit_recipe(kind: str, root: Path = images.REPO_ROOT, python: str = project_pins.DEFAULT_PYTHON) -> str | None:
    """What the kit puts into a project's image, as ``kit`` + 8 hex digits: a hash of the generated Dockerfile
    and KIT_RECIPE's bytes, so a kit that installs another torch (docker/torch.json) or writes another Dockerfile
    makes a new tag instead of leaving `gantry run` on an image built from the old one. None for a Dockerfile of
    the project's own, which takes nothing from the kit."""
    if kind == "Dockerfile":
        return None
    digest = hashlib.sha256(dockerfile(kind, has_dependencies=True, root=root, python=python).encode())
    for name in KIT_RECIPE:
        digest.update(b"\0" + name.encode() + b"\0" + (root / name).read_bytes())
    return "kit" + digest.hexdigest()[:8]
