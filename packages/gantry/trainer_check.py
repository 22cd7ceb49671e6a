"""What the nodes will run, checked on the laptop before a node is started or written to.

The selfplay trainer judges its own config and flags (`python -m selfplay check`, the validation `train` runs),
in a subprocess from the same packages the trainer image carries: the launcher never imports the trainer, and
a refusal costs nothing instead of a started node and a crash loop on it. Your own torchrun program is checked
as far as the laptop can see into the image: its module is under packages/ (the trainer image holds every
package there) or installed here as it is in the image.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from launch_contract import RUN_DIR_ENV

from gantry.errors import GantryError

PACKAGES_DIR = Path(__file__).resolve().parents[1]  # packages/: gantry, selfplay, toytrain, as the image copies them
CHECK_TIMEOUT_S = 120


def check_selfplay(config: str, trainer_args: list[str], run_url: str = "") -> str:
    """Refuse in one line, the trainer's own, when `selfplay train --config CONFIG ARGS` would refuse; else the last
    line the check printed (with --resume: what the trainer will resume from ``run_url``, given to it as a node's
    agent gives it, RUN_DIR_ENV)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGES_DIR),
                                                                     os.environ.get("PYTHONPATH", "")]))}
    if run_url:
        env[RUN_DIR_ENV] = run_url
    try:
        done = subprocess.run([sys.executable, "-m", "selfplay", "check", "--config", config, *trainer_args],
                              capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise GantryError(f"the trainer's check of its flags took over {CHECK_TIMEOUT_S} s",
                          "Run `python -m selfplay check --config CONFIG ARGS` to see why; nothing was started.") from None
    if done.returncode == 0:
        return (done.stdout.strip().splitlines() or [""])[-1]
    lines = done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
    said = next((line for line in reversed(lines) if line.startswith("selfplay: error: ")), None)
    if said is not None:  # the trainer's one line already names the setting and its fix
        raise GantryError(f"the trainer refuses its settings: {said.removeprefix('selfplay: error: ')}",
                          "Nothing was started.")
    raise GantryError(f"could not check the trainer's settings here ({lines[-1]})",
                      "Run gantry from the repository's venv (make install); nothing was started.")


def check_program(program: list[str]) -> None:
    """`-m MODULE` of your own program must exist in the trainer image: a module under packages/, or installed."""
    if program[0] != "-m":
        return  # SCRIPT.py ARGS: a path inside the image, which the laptop cannot see
    module = program[1]
    path = PACKAGES_DIR.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() or (path / "__main__.py").is_file():
        return
    top = module.split(".")[0]
    if not (PACKAGES_DIR / top).is_dir() and importlib.util.find_spec(top) is not None:
        return  # an installed package (torch.distributed..., as the image installs it); find_spec imports nothing
    raise GantryError(f"no module {module} in the trainer image (it holds the packages under {PACKAGES_DIR})",
                      "Check the name, or put your program under packages/ and `make build-train`, or pass --image "
                      "an image that holds it.")
