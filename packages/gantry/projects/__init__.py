"""Your own project as an image: its name and version, the one rule `gantry build --project` tags with and `gantry run
--project` looks up, so a run launches exactly the code that was built.

    image_ref("us-central1-docker.pkg.dev/P/gantry", Path("../my-trainer"), "cuda")
    -> "us-central1-docker.pkg.dev/P/gantry/my-trainer:cuda-3f2a9c1d0b7e-kit5e0c7a12"

The version is the project's git commit when its work tree is clean, else a hash of the files the build sends
(``c`` + 12 hex digits), so an edit not yet committed is a new tag and never overwrites what a run launched. A
project whose Dockerfile gantry writes (pyproject.toml, requirements.txt) gets the kit's part too
(project_dockerfile.kit_recipe: its torch pins and the Dockerfile), so a kit that installs another torch is a new
tag as well; a Dockerfile of the project's own has no ``-kit`` part.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from gantry.projects import context as project_context
from gantry.projects import dockerfile as project_dockerfile
from gantry.projects import pins as project_pins


def name(project: Path) -> str:
    """The image's name: the folder's name in the registry's alphabet (lowercase, digits, . _ -)."""
    cleaned = re.sub(r"[^a-z0-9._-]+", "-", project.resolve().name.lower()).strip("._-")
    return cleaned or "project"


def git_commit(project: Path) -> str | None:
    """The newest commit that touched the project's folder (12 hex digits) when nothing in the folder is
    uncommitted, else None. Scoped to the folder, so a project inside a larger repository (examples/ here) keeps its
    tag across commits elsewhere and is not made dirty by them; .devcontainer is not part of the image
    (project_context leaves it out), so writing one changes nothing."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(project), *args], capture_output=True, text=True, check=False,
                              timeout=60)
    try:
        newest = git("log", "-1", "--format=%H", "--", ".")
        changed = git("status", "--porcelain", "--", ".", ":(exclude).devcontainer")
        if newest.returncode != 0 or not newest.stdout.strip() or changed.returncode != 0 or changed.stdout.strip():
            return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    return newest.stdout.strip()[:12]


def content_hash(project: Path, files: list[Path]) -> str:
    """A hash of the files' paths and bytes: ``c`` + 12 hex digits."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes() + b"\0")
    return "c" + digest.hexdigest()[:12]


def context_files(project: Path) -> list[Path]:
    """The files a build of ``project`` sends (gantry.projects.context, with its ignore rules)."""
    return project_context.context_files(project)


def version(project: Path) -> str:
    return git_commit(project) or content_hash(project, context_files(project))


def local_ref(project: Path, flavour: str) -> str:
    """NAME:FLAVOUR-VERSION, then -KIT where the kit writes the project's Dockerfile. A project whose only Dockerfile
    is elsewhere (`gantry build --dockerfile PATH`) has none of the root kinds: no -KIT, and `gantry run`, which is
    not told the path, names the same tag."""
    found = project_dockerfile.kind(project) if project_dockerfile.has_kind(project) else "Dockerfile"
    recipe = project_dockerfile.kit_recipe(found, python=project_pins.image_python(project)) \
        if found != "Dockerfile" else None
    return f"{name(project)}:{flavour}-{version(project)}" + (f"-{recipe}" if recipe else "")


def image_ref(repository: str, project: Path, flavour: str) -> str:
    """REPO/NAME:FLAVOUR-VERSION[-KIT]: what `gantry build --project` pushes and `gantry run --project` launches."""
    return f"{repository}/{local_ref(project, flavour)}"
