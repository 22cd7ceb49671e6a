"""A project's apt.txt: the Debian packages its image needs besides Python's (libgl1, ffmpeg, libsndfile1), one a
line, # for comments. The image `gantry build --project` writes installs them with git and make (ALWAYS: the dev
container is that image, and a project's Makefile and git work in it) in one layer before the dependencies', so a
code edit or a new requirement keeps it cached.

Each name is asked of Debian's own package index for the base image's release before anything is built, so a
misspelt name costs a second, not a build that fails at apt-get minutes in:

    not a package of Debian bookworm (main, amd64): apt.txt:4: ffmpg (close: ffmpeg, ffmpegfs)

The index (Packages.xz, ~9 MB) is read once a week into ~/.cache/gantry/debian/; where it cannot be reached, one line
says the names were not checked and apt-get judges them in the build.
"""

from __future__ import annotations

import difflib
import lzma
import os
import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from gantry.errors import GantryError

APT_FILE = "apt.txt"
ALWAYS = ("git", "make")
RELEASE = "bookworm"  # docker/Dockerfile's BASE_IMAGE (python:3.11-slim-bookworm, gantry-base:bookworm)
INDEX_URL = f"https://deb.debian.org/debian/dists/{RELEASE}/main/binary-amd64/Packages.xz"
INDEX_URL_ENV = "GANTRY_DEBIAN_INDEX_URL"  # another Packages.xz (a mirror; tests: a file:// one)
INDEX_MAX_AGE_S = 7 * 24 * 3600
NAME = re.compile(r"[a-z0-9][a-z0-9+.-]+")  # Debian policy 5.6.1: lowercase, digits, + - ., two or more
DEBIAN_PACKAGES = f"https://packages.debian.org/{RELEASE}/"


def requested(project: Path) -> list[tuple[int, str]]:
    """(line number, name) of each package apt.txt names; a word that cannot be a package name refused in one line."""
    path = project / APT_FILE
    if not path.is_file():
        return []
    names = []
    for number, raw in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        for word in raw.split("#", 1)[0].split():
            if not NAME.fullmatch(word):
                raise GantryError(f"{APT_FILE}:{number}: {word!r} is not a Debian package name",
                                  "Write one package a line, as apt-get install takes it (libgl1, ffmpeg), no "
                                  "versions or options.")
            names.append((number, word))
    return names


def index_names(environ=os.environ) -> set[str] | None:
    """Every package and virtual package of the index (Package: and Provides:), from the week-old cache or the
    index; None when it cannot be read."""
    url = environ.get(INDEX_URL_ENV) or INDEX_URL
    cache = (Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gantry" / "debian"
             / (re.sub(r"[^A-Za-z0-9.]+", "-", url) + ".names"))
    if cache.is_file() and time.time() - cache.stat().st_mtime < INDEX_MAX_AGE_S:
        return set(cache.read_text().split())
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (https, or the file:// a test names)
            text = lzma.decompress(response.read()).decode("utf-8", "replace")
    except (OSError, lzma.LZMAError):
        return None
    names = set()
    for line in text.splitlines():
        if line.startswith("Package: "):
            names.add(line[9:].strip())
        elif line.startswith("Provides: "):
            names.update(part.split("(")[0].strip() for part in line[10:].split(","))
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("\n".join(sorted(names)) + "\n")
    return names


def check(project: Path, progress: Callable[[str], None], environ=os.environ) -> tuple[str, ...]:
    """The packages the image installs (ALWAYS, then apt.txt's), apt.txt's checked against the index: every name it
    lacks refused in one line, with the names it holds that come close."""
    names = requested(project)
    if names:
        known = index_names(environ)
        if known is None:
            progress(f"gantry: Debian's package index ({environ.get(INDEX_URL_ENV) or INDEX_URL}) cannot be reached: "
                     f"{APT_FILE}'s names are not checked here; apt-get judges them in the build")
        else:
            missing = [(number, name) for number, name in names if name not in known]
            if missing:
                said = "; ".join(f"{APT_FILE}:{number}: {name}" + (
                    f" (close: {', '.join(close)})" if (close := difflib.get_close_matches(name, known, 3, 0.75))
                    else "") for number, name in missing)
                raise GantryError(f"not a package of Debian {RELEASE} (main, amd64): {said}",
                                  f"Fix the names ({DEBIAN_PACKAGES} finds them); nothing was built.")
    return tuple(dict.fromkeys([*ALWAYS, *(name for _, name in names)]))


def install_step(packages: tuple[str, ...]) -> str:
    """The generated Dockerfile's apt layer (as root, before the image's user is set)."""
    return ("RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
            f"{' '.join(packages)} && rm -rf /var/lib/apt/lists/*")
