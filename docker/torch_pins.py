"""torch's pins (docker/torch.json, the one place they live) and the install that follows from them.

    python3 docker/torch_pins.py get KEY              # a value of torch.json: torch, cuda, cpu_index_url, ...
    python3 docker/torch_pins.py index cpu|cuda       # the index the image installs torch from (TORCH_INDEX_URL wins),
                                                      # or exit 1 with one line when a CPU index cannot be reached
    PY -m ... install [-r FILE | SPEC ...]            # the laptop's install into PY's venv (make install, xla_venv.sh)

The laptop install takes CPU-only torch from PyTorch's CPU index (cpu_index_url) and, where that index cannot be
reached, from pip's own find-links and indexes; on Linux x86_64 PyPI serves only the CUDA build, so before
installing it asks pip what it would install and refuses, in one line naming the fix, when that brings CUDA
(nvidia-* packages: gigabytes). TORCH_SPEC (the Makefile's override, e.g. a GPU laptop's torch==2.13.0) is
installed as given; TORCH_ALLOW_CUDA=1 takes a CUDA build on purpose where the requirements come from a file
(scripts/xla_venv.sh). Stdlib only: it runs before the venv holds anything, and in the image's bare python3.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

PINS = Path(__file__).resolve().with_name("torch.json")
PROBE_TIMEOUT_S = 10  # an index that has not answered in 10 s is out of reach for this install
# Requires-Dist lines that carry a CUDA version: cuda-toolkit[...]==13.0.3 (torch >= 2.13), nvidia-*-cu13 / -cu12.
_TOOLKIT = re.compile(r"^cuda-toolkit(\[[^\]]*\])?\s*==\s*(\d+)\.(\d+)")
_NVIDIA_CU = re.compile(r"^nvidia-[a-z0-9-]+-cu(\d+)\b")


def load(path: Path = PINS) -> dict:
    return json.loads(path.read_text())


def requirement(pins: dict | None = None) -> str:
    """torch==<the pinned version>, what every CPU and CUDA install asks for."""
    return f"torch=={(pins or load())['torch']}"


def cuda_of(requires_dist: list[str]) -> str | None:
    """The CUDA MAJOR.MINOR a wheel's Requires-Dist lines pull in (cuda-toolkit==13.0.3 -> 13.0), the major alone
    when only nvidia-*-cuNN names it (-> '13'), None for a CPU-only wheel."""
    majors = set()
    for raw in requires_dist:
        line = raw.split(":", 1)[1].strip() if raw.startswith("Requires-Dist:") else raw.strip()
        found = _TOOLKIT.match(line)
        if found:
            return f"{found.group(2)}.{found.group(3)}"
        found = _NVIDIA_CU.match(line)
        if found:
            majors.add(found.group(1))
    return majors.pop() if len(majors) == 1 else None


def unreachable(index_url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the index answers for torch; else why not, in a few words."""
    url = index_url.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read(1)
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code} for {url}"
    except (urllib.error.URLError, OSError) as e:
        return str(getattr(e, "reason", e))[:120]
    return None


def index_for(flavour: str, pins: dict | None = None) -> str:
    """The pins' torch index for an image flavour: CUDA from cuda_index_url, CPU and TPU from cpu_index_url."""
    return (pins or load())["cuda_index_url" if flavour == "cuda" else "cpu_index_url"]


def image_index(flavour: str, pins: dict | None = None) -> str:
    """The index an image installs torch from: TORCH_INDEX_URL when set, else the pins' index for the flavour.
    A CPU or TPU image has no fallback: the images are linux/amd64, where PyPI's torch is the CUDA build."""
    pins = pins or load()
    index = os.environ.get("TORCH_INDEX_URL") or index_for(flavour, pins)
    problem = unreachable(index) if flavour != "cuda" else None
    if problem:
        raise SystemExit(f"install_torch: the {flavour.upper()} image's torch index {index} cannot be reached "
                         f"({problem}), and PyPI's Linux torch is the CUDA build: put a torch-{pins['torch']}+cpu "
                         f"wheel in WHEEL_DIR (gantry build takes pip's find-links) or set TORCH_INDEX_URL to a "
                         f"mirror of {pins['cpu_index_url']}")
    return index


def _pip(python: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "pip", "--disable-pip-version-check", *args], check=False, **kwargs)


def would_install(python: str, args: list[str]) -> list[dict]:
    """What `pip install ARGS` would install (pip's --dry-run report): one dict per distribution."""
    result = _pip(python, "install", "--quiet", "--dry-run", "--ignore-installed", "--report", "-", *args,
                  capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"torch: pip cannot resolve {' '.join(args)}: "
                         f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(result.stdout)["install"]


def cuda_packages(report: list[dict]) -> tuple[list[str], str | None]:
    """The CUDA distributions in a dry-run report, and the CUDA version torch's metadata asks for."""
    names = sorted((item["metadata"]["name"] for item in report
                    if item["metadata"]["name"].lower().startswith(("nvidia-", "cuda-"))),
                   key=lambda name: (not name.lower().startswith("nvidia-"), name))  # nvidia-* first: the familiar ones
    torch = [item for item in report if item["metadata"]["name"].lower() == "torch"]
    cuda = cuda_of(torch[0]["metadata"].get("requires_dist", [])) if torch else None
    return names, cuda


def installed_torch(python: str) -> tuple[str, list[str]] | None:
    """(version, Requires-Dist) of the torch PYTHON already imports, without importing it; None when it has none."""
    code = ("import json, importlib.metadata as m\n"
            "try:\n    d = m.distribution('torch')\nexcept m.PackageNotFoundError:\n    print('null')\n"
            "else:\n    print(json.dumps([d.version, d.requires or []]))")
    result = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    found = json.loads(result.stdout or "null") if result.returncode == 0 else None
    return tuple(found) if found else None


def install(python: str, requirements: list[str]) -> int:
    """The laptop's torch (see the module's docstring); returns pip's exit status."""
    pins = load()
    spec = os.environ.get("TORCH_SPEC", "")
    have = installed_torch(python) if not (spec or requirements) else None
    if have and have[0].split("+")[0] == pins["torch"] and cuda_of(have[1]) is None:
        # already there (a dev container's venv sees the image's torch): nothing to fetch, nothing to refuse
        print(f"torch: {have[0]} (CPU-only) is already installed", file=sys.stderr)
        return 0
    if spec:  # the user's deliberate choice (a GPU laptop, another version): installed as given
        index = os.environ.get("TORCH_INDEX_URL")
        print(f"torch: {spec} as TORCH_SPEC asks{f', from {index}' if index else ''}", file=sys.stderr)
        args = [spec, *(["--index-url", index] if index else [])]
        # A torch already here satisfies torch==2.13.0 whatever its build (2.13.0+cpu), and pip would keep it: the
        # spec's own build replaces it, then its dependencies (a CUDA build's nvidia-* packages) follow.
        done = _pip(python, "install", "-q", "--force-reinstall", "--no-deps", *args).returncode
        done = done or _pip(python, "install", "-q", *args).returncode
        now = installed_torch(python) if not done else None
        if now:
            cuda = cuda_of(now[1])
            print(f"torch: {now[0]} installed ({f'CUDA {cuda}' if cuda else 'CPU-only'})", file=sys.stderr)
        return done
    requirements = requirements or [requirement(pins)]
    index = os.environ.get("TORCH_INDEX_URL") or pins["cpu_index_url"]
    problem = unreachable(index)
    if problem is None:
        # The CPU index first; everything else (torch's dependencies, torch_xla) from pip's usual index.
        args = ["--index-url", index, "--extra-index-url",
                os.environ.get("PIP_INDEX_URL") or pins["cuda_index_url"], *requirements]
    else:
        args = requirements
    cuda, version = cuda_packages(would_install(python, args))
    if problem and not cuda:  # one line, and only when it is true: what pip takes instead
        print(f"torch: {index} cannot be reached ({problem}): taking a CPU-only {' '.join(requirements)} from pip's "
              f"own find-links and index", file=sys.stderr)
    if cuda and os.environ.get("TORCH_ALLOW_CUDA") == "1":
        print(f"torch: taking the CUDA {version or ''} build ({len(cuda)} CUDA packages) as TORCH_ALLOW_CUDA=1 asks",
              file=sys.stderr)
    elif cuda:
        print(f"torch: error: the only {' '.join(requirements)} pip can reach here is a CUDA {version or ''} build "
              f"({len(cuda)} CUDA packages such as {cuda[0]}: gigabytes) and {index} cannot be reached "
              f"({problem or 'it lacks this platform'}): set PIP_FIND_LINKS to a folder holding a "
              f"torch-{pins['torch']}+cpu wheel, or TORCH_INDEX_URL to a mirror of {pins['cpu_index_url']}; a GPU "
              f"laptop that wants CUDA sets TORCH_SPEC=torch=={pins['torch']} (scripts/xla_venv.sh: TORCH_ALLOW_CUDA=1)",
              file=sys.stderr)
        return 1
    return _pip(python, "install", "-q", *args).returncode


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "get":
        print(load()[argv[1]])
        return 0
    if len(argv) == 2 and argv[0] == "index" and argv[1] in ("cpu", "cuda", "tpu"):
        print(image_index(argv[1]))
        return 0
    if argv and argv[0] == "install":
        return install(sys.executable, argv[1:])
    print("usage: torch_pins.py get KEY | index cpu|cuda|tpu | install [-r FILE | SPEC ...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
