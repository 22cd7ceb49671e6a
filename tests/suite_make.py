"""make as a test runs it, for every test directory (tests/ is on the suite's import path, like gcs_server):
with the suite's own virtual environment, which -o keeps make from reinstalling or checking again, and the
environment a user's shell has. A test adds its target, variables and flags after MAKE.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from checkout import REPO as ROOT

SUITE_VENV = Path(sys.executable).parent.parent
MAKE = ["make", "--no-print-directory", "-C", str(ROOT), "-o", f"{SUITE_VENV}/.installed",
        "-o", f"{SUITE_VENV}/.installed-dev", f"VENV={SUITE_VENV}"]


def clean_environ() -> dict[str, str]:
    """The environment a user's shell has: under `make test` the outer make's MAKELEVEL and MAKEFLAGS would reach
    the make a test runs (and switch its command-line check off), and pytest's own variables a pytest it runs."""
    return {k: v for k, v in os.environ.items()
            if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES") and not k.startswith("PYTEST_")}
