"""The checkout the suite tests: one place for its root (tests/ is on every test's import path, as conftest.py's
folder)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
