"""Every Python name the docs send a reader to (`launch_contract.RunSpec`, `gantry.cli.apply`) exists: a renamed
or moved function breaks this test, not a reader's search (README.md, bench/RESULTS.md, docs/*.md)."""

from __future__ import annotations

import importlib
import re

import pytest
from checkout import REPO as ROOT

DOCS = [ROOT / "README.md", ROOT / "bench/RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("selfplay", "gantry", "gantry_agent", "launch_contract", "toytrain")
NAME = re.compile(rf"`((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)`")


def named() -> list[tuple[str, str]]:
    return sorted({(path.relative_to(ROOT).as_posix(), name) for path in DOCS for name in NAME.findall(path.read_text())
                   if not name.endswith((".py", ".yaml"))})  # a file (`launch_contract.py`, `gantry.yaml`), not an object


def resolve(name: str) -> object:
    """The module or attribute a dotted name means: its longest importable prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(name)


@pytest.mark.parametrize("doc, name", named(), ids=[f"{d}: {n}" for d, n in named()])
def test_every_python_name_the_docs_show_exists(doc, name):
    try:
        resolve(name)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"{doc} names `{name}`, which does not exist ({error})")
