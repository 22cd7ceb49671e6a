"""The agent's one metadata value: infra/locals.tf's agent_bundle, evaluated by Terraform itself, is the object that
gantry_agent.shipped_files() builds for the node twin and the startup-script tests, and it fits one GCE metadata
value (256 KB each)."""

import json
import re

import pytest
from gantry_agent import shipped_files
from infra_tools import REPO, apply_and_read_output, require_tool

pytestmark = pytest.mark.terraform

METADATA_VALUE_LIMIT = 256 * 1024  # bytes: GCE's limit on one metadata value


def _locals_tf_bundle_expression() -> str:
    """infra/locals.tf's agent_bundle expression, as written there (so this test follows it, not a copy)."""
    found = re.search(r"^\s*agent_bundle\s*=\s*(.+)$", (REPO / "infra" / "locals.tf").read_text(), re.MULTILINE)
    assert found, "infra/locals.tf names no agent_bundle"
    return found.group(1).strip()


@pytest.fixture(scope="module")
def terraform_bundle(tmp_path_factory) -> str:
    require_tool("terraform", "install Terraform >= 1.9 (CI machines have 1.11)")
    root = tmp_path_factory.mktemp("agent-bundle")
    config = root / "config"
    config.mkdir()
    (config / "main.tf").write_text(
        "locals {\n"
        f'  agent_package_dir = "{REPO / "packages" / "gantry_agent"}"\n'
        f"  agent_bundle      = {_locals_tf_bundle_expression()}\n"
        "}\n\n"
        'output "bundle" {\n  value = local.agent_bundle\n}\n'
    )
    return apply_and_read_output(config, root / "tf-data", "bundle")


def test_terraform_ships_the_files_shipped_files_builds(terraform_bundle):
    shipped = json.loads(terraform_bundle)
    assert shipped == shipped_files()
    assert {"__main__.py", "__init__.py", "decide.py", "agent.py"} <= shipped.keys()


def test_the_bundle_fits_one_metadata_value(terraform_bundle):
    # Terraform's jsonencode escapes <, > and & (\u003c ...), so its value is a little longer than json.dumps'.
    assert len(terraform_bundle.encode()) < METADATA_VALUE_LIMIT
    assert len(json.dumps(shipped_files()).encode()) < METADATA_VALUE_LIMIT
