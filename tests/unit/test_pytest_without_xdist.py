"""The suite collects without pytest-xdist (#42): tests/conftest.py's scheduler hook is xdist's, and optional."""

from __future__ import annotations

import os
import subprocess
import sys

from checkout import REPO as ROOT


def test_pytest_without_xdist_collects_and_passes_a_test_file():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MAKE"))}  # not this run's options
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q",
                             "tests/unit/test_make_help.py", "-k", "every_documented_target"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "INTERNALERROR" not in result.stdout + result.stderr
    assert "1 passed" in result.stdout.splitlines()[-1], result.stdout
