"""Before any layer is built: can pip install every requirement of the project in the image, as wheels for the
image's Python and platform? Asked of pip's own resolver (`pip install --dry-run` with --python-version, --platform
and --only-binary, no download, no build), against the index pip is configured for, in seconds.

    requirements.txt:12: grpcio==1.46.3 has no wheel for Python 3.11 on linux x86_64 (newest that has: 1.76.0)

A requirement without such a wheel would be built from its source in the image: minutes of compiling that fail for
most packages with C code (the base has no compiler), the cause in a build log. So every such line is named at once,
each alone (pip's resolver stops at the first), then the whole set is resolved together for a conflict. Lines pip
could not install in the image at all (`-e .`, a local path: the dependency layer holds only the requirement files)
are refused first. Where the index cannot be reached, nothing is refused: one line says the check was skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gantry.errors import GantryError
from gantry.projects import pins as project_pins
from gantry.projects.pins import DEFAULT_PYTHON, Line

IMAGE_GLIBC_MINOR = 36  # Debian bookworm's glibc 2.36: wheels tagged manylinux_2_36 and older run there
# What `--platform` must list for pip to take every wheel that runs on the image: pip expands manylinux2014 to
# manylinux2010 and manylinux1 itself (pip/_internal/utils/compatibility_tags.py), but not the PEP 600 names.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(IMAGE_GLIBC_MINOR, 16, -1)] + ["manylinux2014_x86_64"]
PARALLEL = 8  # requirements asked of the index at once
OPTION_LINES = ("-r", "--requirement", "-c", "--constraint")  # read through project_pins.requirement_lines
UNREACHABLE = re.compile(r"Could not fetch URL|Failed to establish a new connection|Temporary failure in name "
                         r"resolution|Network is unreachable|Max retries exceeded|timed out", re.IGNORECASE)
NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (\S+) \(from versions: ([^)]*)\)")
LOCAL = re.compile(r"^(\.{1,2}/|/|file:)")


def where(python: str) -> str:
    return f"Python {python} on linux x86_64"


def pip_command(target: str, *requirements: str, deps: bool = False, python: str = DEFAULT_PYTHON) -> list[str]:
    """pip's resolver for the image's Python and platform, wheels only, nothing downloaded or installed."""
    return [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
            "--disable-pip-version-check", "--retries", "1", "--timeout", "15", "--target", target,
            "--python-version", python, "--implementation", "cp", "--only-binary=:all:",
            *[arg for platform in PLATFORMS for arg in ("--platform", platform)], *([] if deps else ["--no-deps"]),
            *requirements]


def refuse_uninstallable(lines: list[Line]) -> None:
    """Lines pip cannot install in the dependency layer, refused in one line naming them and what works."""
    for line in lines:
        words = line.text.split()
        if words[0] in ("-e", "--editable"):
            raise GantryError(f"{line.file}:{line.number}: {line.text} installs a folder in editable mode, and the "
                              "image's dependency layer holds only the requirement files",
                              "Drop the line: gantry copies the project into the image and runs it there; a "
                              "pyproject.toml with a [project] table instead is installed with it; nothing was built")
        if LOCAL.match(words[0]):
            raise GantryError(f"{line.file}:{line.number}: {line.text} is a local path, which the image's dependency "
                              "layer does not hold", "Publish it to an index, or install it in a Dockerfile of your "
                              "own (gantry build then uses that); nothing was built")


def requirements_of(lines: list[Line]) -> tuple[list[Line], list[str]]:
    """(the requirement lines, the pip options every probe needs: --index-url, --extra-index-url, --find-links)."""
    options = [word for line in lines if line.text.startswith("-") and line.text.split()[0] not in OPTION_LINES
               for word in line.text.replace("=", " ", 1).split()]
    return [line for line in lines if not line.text.startswith("-")], options


def why_not(result: subprocess.CompletedProcess, named: bool = False, python: str = DEFAULT_PYTHON) -> str:
    """pip's refusal as a few words: no wheel for the image (and the newest version that has one), the requirement
    first when ``named`` (a dependency's), or pip's own first ERROR line."""
    said = result.stderr
    found = NO_VERSION.search(said)
    if found:
        newest = f" (newest that has: {newest_final(found.group(2))})" if found.group(2).strip() != "none" \
            else " (no version has one)"
        return f"{found.group(1) + ' ' if named else ''}has no wheel for {where(python)}{newest}"
    errors = [line.removeprefix("ERROR: ") for line in said.splitlines() if line.startswith("ERROR: ")]
    return errors[0] if errors else f"pip exited {result.returncode}"


def newest_final(listed: str) -> str:
    """The newest release in pip's "(from versions: ...)" list, a pre-release only where there is nothing else."""
    from packaging.version import InvalidVersion, Version

    versions = []
    for text in (v.strip() for v in listed.split(",")):
        try:
            versions.append(Version(text))
        except InvalidVersion:
            continue
    finals = [v for v in versions if not v.is_prerelease]
    return str(max(finals or versions)) if versions else listed.split(",")[-1].strip()


def resolved_marker(requirements: list[Line], options: list[str], pins: dict, python: str = DEFAULT_PYTHON) -> Path:
    """Where a set that resolved is remembered: a code-only rebuild (the same requirements, kit and image) asks the
    index nothing."""
    key = json.dumps([python, PLATFORMS, pins["torch"], options, [line.text for line in requirements]])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "gantry" / "resolved" / hashlib.sha256(key.encode()).hexdigest()[:24]


def check(lines: list[Line], pins: dict, say: Callable[[str], None], run=subprocess.run,
          python: str = DEFAULT_PYTHON) -> None:
    """Refuse, in one line naming each FILE:LINE, the requirements that pip would build from source in the image or
    cannot find, or a set that does not resolve together under the image's torch (project_pins.constraint); torch
    itself is the image's (project_pins.check judged its line). One pip call for a set that resolves; only when it
    does not, one more a requirement, so that the refusal names every line at fault."""
    from packaging.utils import canonicalize_name

    refuse_uninstallable(lines)
    requirements, options = requirements_of(lines)
    requirements = [line for line in requirements
                    if canonicalize_name(re.split(r"[\s<>=!~;\[@]", line.text, maxsplit=1)[0]) != "torch"]
    marker = resolved_marker(requirements, options, pins, python)
    here = where(python)
    if not requirements or marker.is_file():
        return
    with tempfile.TemporaryDirectory(prefix="gantry-resolve-") as target:
        constraint = Path(target) / "torch-constraint.txt"
        constraint.write_text(project_pins.constraint(pins))

        def probe(*texts: str, deps: bool = False) -> subprocess.CompletedProcess:
            return run(pip_command(target, *options, *texts, deps=deps, python=python), capture_output=True, text=True,
                       timeout=300, check=False)

        together = probe("-c", str(constraint), *[line.text for line in requirements], deps=True)
        if together.returncode == 0:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            say(f"gantry: all {len(requirements)} requirement(s) resolve to wheels for {here}")
            return
        if UNREACHABLE.search(together.stderr):
            say(f"gantry: could not reach the package index to check the requirements for {here}: building "
                "without the check (a requirement without a wheel fails in the build)")
            return
        with ThreadPoolExecutor(PARALLEL) as pool:
            results = list(pool.map(lambda line: probe(line.text), requirements))
    failed = [(line, why_not(r, python=python)) for line, r in zip(requirements, results) if r.returncode]
    if failed:
        named = "; ".join(f"{line.file}:{line.number}: {line.text} {why}" for line, why in failed)
        raise GantryError(f"{len(failed)} of {len(requirements)} requirement(s) cannot be installed in the image as "
                          f"wheels: {named}",
                          f"Pin versions with wheels for {here} (`pip index versions NAME` lists them), or ask for "
                          f"the Python they need in {project_pins.PYTHON_FILE} "
                          f"({'3.10' if python == DEFAULT_PYTHON else ', '.join(project_pins.PYTHONS)}); nothing was "
                          "built")
    raise GantryError(f"the requirements do not resolve together for {here} with the image's torch "
                      f"{pins['torch']}: {why_not(together, named=True, python=python)}",
                      "Loosen or change the pins pip names (its full message: pip install --dry-run -r "
                      "requirements.txt); nothing was built")


def lock_files(project: Path) -> list[str]:
    """The lock files a project keeps that gantry does not read (it installs requirements.txt or [project])."""
    return [name for name in ("requirements.lock", "uv.lock", "poetry.lock", "Pipfile.lock", "pdm.lock")
            if (project / name).is_file()]
