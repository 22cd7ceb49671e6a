"""A project's requirements against the image's torch (docker/torch.json): a requirement that would replace it (another
version, a +cuXYZ build, an index of another CUDA's torch) is refused before any build, naming its file and line.

    requirements.txt:3: torch==2.1.0 asks for torch 2.1.0, the image's is 2.13.0 (docker/torch.json)

The build also installs the dependencies under a constraint (``torch==PIN``), so a dependency of a dependency cannot
swap torch either: pip then fails to resolve, in the build log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import tomllib

from gantry.errors import GantryError

TORCH_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/)?(cu\d+|cpu|rocm[\d.]+|xpu)\b")
INDEX_OPTIONS = ("--index-url", "-i", "--extra-index-url", "-f", "--find-links")
# the image's platform, for environment markers (the nodes are linux/amd64 with the base's Python 3.11)
MARKER_ENVIRONMENT = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
                      "os_name": "posix", "python_version": "3.11", "python_full_version": "3.11.0",
                      "implementation_name": "cpython", "platform_python_implementation": "CPython"}
DEFAULT_PYTHON = MARKER_ENVIRONMENT["python_version"]  # docker/Dockerfile's BASE_IMAGE, python:3.11-slim-bookworm
# The Pythons a project may ask for in PYTHON_FILE: PyPI has torch's wheels for them (tests/index asks it) and Docker
# Hub a python:X-slim-bookworm base (Debian bookworm, as the kit's other layers).
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
PYTHON_FILE = ".python-version"  # pyenv's and uv's file: the project's Python, for its image too


PYTHON_FILES = (PYTHON_FILE, "runtime.txt")  # repo2docker's too: runtime.txt says python-3.10


def image_python(project: Path) -> str:
    """The Python (MAJOR.MINOR) of the project's image, from what the project already says, in repo2docker's order:
    .python-version (3.10, 3.10.12) or runtime.txt (python-3.10), else pyproject's requires-python (the kit's 3.11
    where it allows it, else the newest of PYTHONS it allows), else DEFAULT_PYTHON. One it cannot have is refused
    in one line naming the file."""
    for name in PYTHON_FILES:
        path = project / name
        if path.is_file():
            text = next((line.strip() for line in path.read_text(errors="replace").splitlines()
                         if line.strip() and not line.startswith("#")), "")
            found = re.fullmatch(r"(?:c?python-?)?(3\.\d+)(?:\.\d+)?", text)
            if found is None or found.group(1) not in PYTHONS:
                raise GantryError(f"{name}: {text!r} is not a Python the project's image can have",
                                  f"Write one of {', '.join(PYTHONS)} there (or remove the file: {DEFAULT_PYTHON}); "
                                  "nothing was built")
            return found.group(1)
    return requires_python(project) or DEFAULT_PYTHON


def requires_python(project: Path) -> str | None:
    """The Python pyproject.toml's requires-python allows: the kit's where it may, else the nearest to it."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        wanted = tomllib.loads((project / "pyproject.toml").read_text()).get("project", {}).get("requires-python")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if not isinstance(wanted, str):
        return None
    try:
        allowed = [python for python in PYTHONS if SpecifierSet(wanted).contains(f"{python}.0")]
    except InvalidSpecifier:
        allowed = []
    if not allowed:
        raise GantryError(f"pyproject.toml: requires-python = {wanted!r} allows none of the Pythons the project's "
                          f"image can have ({', '.join(PYTHONS)})", "Widen it, or name one in .python-version; "
                          "nothing was built")
    return min(allowed, key=lambda python: abs(int(python.split(".")[1]) - int(DEFAULT_PYTHON.split(".")[1])))


def marker_environment(python: str = DEFAULT_PYTHON) -> dict[str, str]:
    """The image's environment markers with ``python`` as its Python."""
    return {**MARKER_ENVIRONMENT, "python_version": python, "python_full_version": f"{python}.0"}


@dataclass
class Line:
    file: str  # as shown: requirements.txt, sub/extra.txt, pyproject.toml
    number: int
    text: str


def image_torch(flavour: str, pins: dict) -> str:
    """The torch version the flavour's image holds: PyPI's CUDA build as is, the CPU index's with +cpu."""
    return pins["torch"] if flavour == "cuda" else f"{pins['torch']}+cpu"


def cuda_label(pins: dict) -> str:
    return "cu" + pins["cuda"].replace(".", "")


def requirement_lines(project: Path, name: str = "requirements.txt", seen: set | None = None) -> list[Line]:
    """A requirements file's logical lines (continuations joined, comments cut), with those of the files it
    includes (-r / -c) after it."""
    seen = seen if seen is not None else set()
    path = project / name
    if name in seen or not path.is_file():
        return []
    seen.add(name)
    lines: list[Line] = []
    pending, start = "", 0
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
        text = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text, pending = (pending + text).strip(), ""
        if text:
            lines.append(Line(name, start, text))
    for line in list(lines):
        option, _, value = line.text.partition(" ")
        if option in ("-r", "--requirement", "-c", "--constraint") and value.strip():
            included = (Path(name).parent / value.strip()).as_posix()
            lines += requirement_lines(project, included, seen)
    return lines


def included_files(lines: list[Line]) -> list[str]:
    return sorted({line.file for line in lines})


def pyproject_lines(project: Path) -> list[Line]:
    """[project].dependencies, each with the line of pyproject.toml that names it."""
    path = project / "pyproject.toml"
    try:
        table = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise GantryError(f"{path} is not valid TOML ({e})", "Fix the file, then build again") from None
    if "project" not in table:
        poetry = "tool" in table and "poetry" in table["tool"]
        raise GantryError(f"{path} has no [project] table, so its dependencies are not where pip reads them"
                          + (" (Poetry keeps them in [tool.poetry.dependencies])" if poetry else ""),
                          "Add a requirements.txt beside it (gantry then builds from that"
                          + ("; `poetry export -f requirements.txt -o requirements.txt --without-hashes` writes one"
                             if poetry else "") + ") or a [project] table with its dependencies; nothing was built")
    dependencies = table.get("project", {}).get("dependencies", [])
    text_lines = path.read_text().splitlines()
    found = []
    for dependency in dependencies:
        number = next((n for n, line in enumerate(text_lines, 1) if f'"{dependency}"' in line
                       or f"'{dependency}'" in line), 0)
        found.append(Line("pyproject.toml", number, dependency))
    return found


def conflict(line: Line, flavour: str, pins: dict, python: str = DEFAULT_PYTHON) -> str | None:
    """Why this line would replace the image's torch, or None."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    image = image_torch(flavour, pins)
    words = line.text.replace("=", " ", 1).split() if line.text.startswith("-") else []
    if words and words[0] in INDEX_OPTIONS and len(words) > 1:
        index = TORCH_INDEX.search(words[1])
        wanted = index.group(1) if index else None
        fits = wanted == ("cpu" if flavour != "cuda" else cuda_label(pins))
        if wanted and not fits:
            return f"{line.text} points at torch's {wanted} builds, the {flavour} image's torch is {image}"
        return None
    if line.text.startswith("-"):
        return None
    try:
        requirement = Requirement(re.split(r"\s--?\w", line.text, maxsplit=1)[0])
    except InvalidRequirement:
        return None  # a local path or URL of something else: pip reads it, torch it is not
    if canonicalize_name(requirement.name) != "torch":
        return None
    if requirement.marker and not requirement.marker.evaluate(marker_environment(python)):
        return None  # not for the image's platform
    if requirement.url:
        wheel = re.search(r"torch-([^-]+)-", requirement.url)
        asked = wheel.group(1).replace("%2B", "+") if wheel else requirement.url
        try:
            if wheel and Version(asked) == Version(image):
                return None
        except InvalidVersion:
            pass
        return f"{line.text} asks for torch {asked}, the {flavour} image's is {image}"
    if requirement.specifier.contains(image, prereleases=True):
        return None
    if not any(spec.operator == "==" and "+" in spec.version for spec in requirement.specifier) \
            and requirement.specifier.contains(pins["torch"], prereleases=True):
        return None  # torch>=2.0: the image's local label (+cpu) is no matter to a range
    specs = list(requirement.specifier)
    asked = specs[0].version if len(specs) == 1 and specs[0].operator in ("==", "===") else requirement.specifier
    return f"{line.text} asks for torch {asked}, the {flavour} image's is {image}"


def check(project: Path, kind: str, flavour: str, pins: dict) -> None:
    """Refuse, in one line naming FILE:LINE, a requirement that fights the image's torch."""
    lines = requirement_lines(project) if kind == "requirements.txt" else pyproject_lines(project)
    python = image_python(project)
    for line in lines:
        problem = conflict(line, flavour, pins, python)
        if problem:
            raise GantryError(f"{line.file}:{line.number}: {problem} (docker/torch.json)",
                              f"Leave torch out of {line.file} (the image has it) or pin torch=={pins['torch']}; "
                              f"nothing was built")


def constraint(pins: dict) -> str:
    """The pip constraint the dependencies install under: torch stays the image's."""
    return f"torch=={pins['torch']}\n"
