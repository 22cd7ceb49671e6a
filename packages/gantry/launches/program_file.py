"""A project's gantry.yaml: the program `gantry run` (and `gantry run-local`) starts when no command follows `--`,
declared once in the project's folder. The kit's own trainer declares itself in the repository's gantry.yaml the
same way, so the launcher reads these keys and knows nothing of any program; every key is optional but command:

    command: python train.py            # what runs on every node; the flags after -- are appended to it
    check: python train.py --dry-run    # run on this machine first, in the project's folder, with the same flags;
                                        # a non-zero exit refuses the launch with its last line and starts nothing
    sync: [checkpoints]                 # as --sync: folders each node keeps in the bucket
    stats: checkpoints/metrics.jsonl    # as --stats: the program's own stats, whose numbers `make status` shows
    figures: {loss: "loss {:.3f}"}      # which of those numbers `make status` shows, and how
    ray: true                           # as --ray: one Ray cluster across the nodes, the command on node 0
    pace: {key: samples_per_s, unit: samples}     # `make status` prices a million of them at the node's list price
    reports:                            # lines `make status` reads from the newest record holding these keys,
                                        # in the bucket's copy of stats (so it lies in a sync folder)
      - {title: Eval accuracy, keys: "eval/*/accuracy", format: "{:.1%}"}

A check whose first word is python runs with the Python that runs gantry; with `gantry run --resume` it gets
GANTRY_RUN_DIR, the run's folder in the bucket, as a node gives it: node 0's copy of a sync folder DIR, which the
program resumes from, is under it at sync/node-0/DIR (launch_contract.sync_url).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from launch_contract import RUN_DIR_ENV

from gantry.errors import GantryError

FILE_NAME = "gantry.yaml"
KIT_ROOT = Path(__file__).resolve().parents[3]  # the repository: the kit's trainer is its project
PACKAGES_DIR = KIT_ROOT / "packages"  # what the kit's image holds (selfplay, toytrain, yours under packages/)
KEYS = ("command", "check", "sync", "stats", "figures", "pace", "reports", "ray")
CHECK_TIMEOUT_S = 120
PYTHON = re.compile(r"python(3(\.\d+)?)?")  # a command's python, python3, python3.12
ARGPARSE_ERROR = re.compile(r"^[\w.-]+: error: ")  # `prog: error: what`, argparse's one line


@dataclass(frozen=True)
class ProgramFile:
    """A gantry.yaml, read and checked (load)."""

    path: Path
    command: tuple[str, ...]
    check: tuple[str, ...] = ()
    sync: tuple[str, ...] = ()
    stats: str = ""
    figures: dict = field(default_factory=dict)  # RunSpec.figures
    show: dict = field(default_factory=dict)  # RunSpec.show: {"pace": {...}, "reports": [...]}
    ray: bool = False  # RunSpec.ray

    @property
    def folder(self) -> Path:
        return self.path.parent


class _UniqueKeys(yaml.SafeLoader):
    """safe_load that refuses a key given twice, which YAML would settle silently by the last."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load(folder: Path) -> ProgramFile | None:
    """The folder's gantry.yaml, or None when it has none; each mistake refused in one line naming the key."""
    path = folder / FILE_NAME
    if not path.is_file():
        return None
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeys)  # noqa: S506 (a SafeLoader)
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as error:
        raise GantryError(f"{path} is not YAML we can read: {' '.join(str(error).split())}",
                          "Fix the line it names.") from None
    if not isinstance(data, dict):
        raise GantryError(f"{path} holds no mapping", f"Write keys ({', '.join(KEYS)}), at least command:.")
    wrong = [str(key) for key in data if key not in KEYS]
    if wrong:
        raise GantryError(f"{path}: unknown key {', '.join(wrong)}", f"The keys it takes: {', '.join(KEYS)}.")

    def bad(key: str, what: str) -> GantryError:
        return GantryError(f"{path}: {key} is {data.get(key)!r}, not {what}", f"See `gantry run --help`, {FILE_NAME}.")

    def words(key: str) -> tuple[str, ...]:
        value = data.get(key) or ()
        if isinstance(value, str):
            value = shlex.split(value)
        if not isinstance(value, (list, tuple)) or not all(isinstance(w, str) for w in value):
            raise bad(key, "a command (a string, or a list of words)")
        return tuple(value)

    command = words("command")
    if not command:
        raise GantryError(f"{path} names no command", "Add command: (e.g. command: python train.py).")
    sync = data.get("sync") or ()
    sync = (sync,) if isinstance(sync, str) else sync
    if not isinstance(sync, (list, tuple)) or not all(isinstance(s, str) for s in sync):
        raise bad("sync", "a folder or a list of folders")
    if not isinstance(data.get("stats") or "", str):
        raise bad("stats", "a file name")
    figures = data.get("figures") or {}
    if not isinstance(figures, dict) or not all(isinstance(k, str) and formats(v) for k, v in figures.items()):
        raise bad("figures", 'a mapping of key to format ({"loss": "loss {:.3f}"})')
    pace = data.get("pace") or {}
    if pace and not (isinstance(pace, dict) and set(pace) == {"key", "unit"} and all(isinstance(v, str)
                                                                                       for v in pace.values())):
        raise bad("pace", "{key: KEY, unit: WHAT} (the stats key of a rate per second, and what it counts)")
    reports = data.get("reports") or []
    if not isinstance(reports, list) or not all(
            isinstance(r, dict) and set(r) <= {"title", "keys", "format"} and isinstance(r.get("title"), str)
            and isinstance(r.get("keys"), str) and r["keys"].count("*") <= 1 and formats(r.get("format", "{:g}"))
            for r in reports):
        raise bad("reports", "a list of {title, keys (one * at most), format}")
    stats = data.get("stats") or ""
    if reports and not any(stats.startswith(f"{folder.strip('/')}/") for folder in sync):
        raise GantryError(f"{path}: reports are read from the bucket's copy of the stats file, and "
                          f"{f'stats {stats}' if stats else 'no stats file'} lies in no sync folder",
                          "Name a stats file inside a sync folder (sync: [out], stats: out/stats.jsonl).")
    show = {k: v for k, v in (("pace", pace), ("reports", reports)) if v}
    if not isinstance(data.get("ray", False), bool):
        raise bad("ray", "true or false")
    return ProgramFile(path, command, words("check"), tuple(sync), stats, dict(figures), show, data.get("ray", False))


def formats(text) -> bool:
    """A format a number fills: "loss {:.3f}"."""
    try:
        return isinstance(text, str) and text.format(1.5) != text
    except (ValueError, IndexError, KeyError):
        return False


def run_check(declared: ProgramFile, flags: list[str], run_url: str = "") -> str:
    """Refuse in one line, the check's own, when the declared check exits non-zero with ``flags``; else the last line
    it printed. ``run_url``: the run's folder, given as a node's agent gives it (RUN_DIR_ENV), for a resume."""
    if not declared.check:
        return ""
    argv = [*declared.check, *flags]
    shown = shlex.join(argv)
    if PYTHON.fullmatch(argv[0]):
        argv[0] = sys.executable
    env = {**os.environ, RUN_DIR_ENV: run_url} if run_url else None
    try:
        done = subprocess.run(argv, cwd=declared.folder, capture_output=True, text=True, env=env,
                              timeout=CHECK_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise GantryError(f"the check of {declared.path} ({argv[0]}) is not a program on this machine",
                          "Install it here, or change check: in the file; nothing was started.") from None
    except subprocess.TimeoutExpired:
        raise GantryError(f"`{shown}` took over {CHECK_TIMEOUT_S} s", f"Run it in {declared.folder} to see why; "
                          "nothing was started.") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}").splitlines()[-1]
        raise GantryError(f"the program's check refuses the launch: {ARGPARSE_ERROR.sub('', said)}",
                          f"Nothing was started (`{shown}` in {declared.folder}; {declared.path}).")
    return (done.stdout.strip().splitlines() or [""])[-1]


def check_module(program: list[str]) -> None:
    """`-m MODULE` of a torchrun program in the kit's image must exist there: a module under packages/, or
    installed (as the image installs torch)."""
    if program[0] != "-m":
        return  # SCRIPT.py ARGS: a path inside the image, which the laptop cannot see
    module = program[1]
    path = PACKAGES_DIR.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or (path / "__main__.py").is_file():
        return
    top = module.split(".")[0]
    if not (PACKAGES_DIR / top).is_dir() and importlib.util.find_spec(top) is not None:
        return  # an installed package (torch.distributed..., as the image installs it); find_spec imports nothing
    raise GantryError(f"no module {module} in the kit's image (it holds the packages under {PACKAGES_DIR})",
                      "Check the name, or put your program under packages/ and `make build-train`, or pass --image "
                      "an image that holds it.")
