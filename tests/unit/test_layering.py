"""The layering, read from the source: the trainer and the launcher meet only in the launch contract.

    laptop (gantry) -> Terraform (infra/) -> VM agent (gantry/agent.py + launch_contract.py) -> container -> trainer

selfplay and toytrain run in the container and gantry on the laptop (its agent on the VM); a name both sides need
lives in launch_contract.py, which imports nothing of Gantry's, so that it can ship to the VM beside the agent.
"""

import ast
import sys
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
CONTRACT = PACKAGES / "launch_contract.py"


def imported_modules(path: Path) -> set[str]:
    """Every absolute module an import statement in ``path`` names, at any depth (function-level imports too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def top_level(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize(("package", "forbidden"), [("selfplay", "gantry"), ("gantry", "selfplay"),
                                                     ("toytrain", "gantry"), ("toytrain", "selfplay")])
def test_the_trainers_and_the_launcher_do_not_import_each_other(package, forbidden):
    files = sorted((PACKAGES / package).rglob("*.py"))
    assert files, f"no modules under packages/{package}"
    crossing = [f"{path.relative_to(PACKAGES)}" for path in files if forbidden in top_level(imported_modules(path))]
    assert crossing == [], f"{package} imports {forbidden}; share the name through launch_contract.py instead"


def test_the_contract_is_a_stdlib_leaf():
    """It ships to the VM as one file beside the agent and runs on the system Python: nothing else is there."""
    imported = top_level(imported_modules(CONTRACT))
    assert {name for name in imported if name not in sys.stdlib_module_names} == set()


def test_the_agent_imports_only_the_stdlib_and_the_contract():
    """The agent's file and the contract are all the VM gets (infra/locals.tf): no other module of Gantry's."""
    imported = top_level(imported_modules(PACKAGES / "gantry" / "agent.py"))
    assert {name for name in imported if name not in sys.stdlib_module_names} == {"launch_contract"}
