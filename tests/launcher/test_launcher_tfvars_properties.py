"""Generated mistakes in infra/terraform.tfvars: every verb that reads the file answers with the documented
exit status and exactly one `gantry: error:` line naming the fix, no traceback, no API call and no file
changed in infra/. The file starts valid and gets one mistake a user makes: a wrong type, a value out of
range, a malformed name, a misspelt key, a line that is not `key = value`."""

from __future__ import annotations

import hashlib
import io
import re
import tempfile
from pathlib import Path

import pytest
from gantry.cli import Environment, main
from gantry.status import ExitStatus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from launcher_helpers import REPO, Deployment, NotATerminal, needs_terraform
from local_cloud.compute import FakeCompute

pytestmark = [pytest.mark.slow, pytest.mark.terraform, needs_terraform]

DECLARED = re.findall(r'^variable "([^"]+)"', (REPO / "infra" / "variables.tf").read_text(), re.MULTILINE)
NUMBERS = ["node_count", "accelerator_count", "max_run_hours", "idle_shutdown_minutes", "boot_disk_size_gb"]
BOOLS = ["use_gpu", "spot", "bucket_force_destroy", "allow_non_c4_cpu_shape"]
NAMES = ["project_id", "zone", "region", "deployment_name", "cpu_machine_type"]

wrong_type = st.one_of(
    st.tuples(st.sampled_from(NUMBERS), st.sampled_from(['"two"', "true", '"1x"'])),
    st.tuples(st.sampled_from(BOOLS), st.sampled_from(["1", '"yes"', "0"])),
)
out_of_range = st.one_of(
    st.tuples(st.just("node_count"), st.integers(max_value=0).map(str)),
    st.tuples(st.just("node_count"), st.floats(1.05, 9.95).map(lambda x: f"{x:.2f}")),
    st.tuples(st.just("max_run_hours"), st.floats(-1e4, 0.09).map(lambda x: f"{x:.3f}").filter(lambda s: float(s) != 0)),
    st.tuples(st.just("max_run_hours"), st.integers(2881, 10**6).map(str)),
    st.tuples(st.just("boot_disk_size_gb"), st.integers(-100, 49).map(str)),
    st.tuples(st.just("idle_shutdown_minutes"), st.integers(max_value=-1).map(str)),
    st.tuples(st.just("accelerator_count"), st.sampled_from(["0", "3", "5", "8", "16"])),
)
# Names that break the rules by construction: an upper-case letter or an underscore in them.
malformed_name = st.tuples(
    st.sampled_from(NAMES),
    st.from_regex(r"\A[a-z]{2,8}[A-Z_][a-z0-9]{0,8}\Z").map(lambda s: f'"{s}"'),
)


def _misspelt(name: str, draw) -> str:
    i = draw(st.integers(0, len(name) - 1))
    return name[:i] + name[i + 1:] if draw(st.booleans()) else name[:i] + "x" + name[i:]


@st.composite
def mistakes(draw) -> str:
    """One line of tfvars that Terraform or gantry must refuse."""
    kind = draw(st.sampled_from(["type", "range", "name", "key", "syntax"]))
    if kind == "key":
        key = _misspelt(draw(st.sampled_from(DECLARED)), draw)
        if key in DECLARED:
            key += "s"
        return f"{key} = true"
    if kind == "syntax":
        return draw(st.sampled_from([
            'zone = "us-central1-a',  # unterminated string
            "zone = us-central1-a",  # unquoted
            "spot true",  # no =
            'node_count = = 2',
            "{",
        ]))
    key, value = draw({"type": wrong_type, "range": out_of_range, "name": malformed_name}[kind])
    if key == "accelerator_count":
        return f"use_gpu = true\n{key} = {value}"  # the count is checked on the GPU path only
    return f"{key} = {value}"


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def fake():
    with FakeCompute.us_central1(project="demo-project") as server:
        yield server


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mistake=mistakes(), verb=st.sampled_from(["cost", "preflight", "apply", "destroy", "build"]))
def test_every_mistake_gets_one_line_and_changes_nothing(fake, mistake, verb):
    with tempfile.TemporaryDirectory() as folder:
        deployment = Deployment(Path(folder))
        deployment.tfvars.write_text(f'project_id = "demo-project"\n{mistake}\n')
        before = _tree(deployment.infra)
        fake.requests.clear()
        out, err = io.StringIO(), io.StringIO()
        env = Environment(stdout=out, stderr=err, stdin=NotATerminal(""),
                          environ={"GANTRY_COMPUTE_ENDPOINT": fake.endpoint})
        argv = [verb, "--infra-dir", str(deployment.infra)] + (["--yes"] if verb == "destroy" else [])
        status = main(argv, env)
        errors = [line for line in err.getvalue().splitlines() if line.startswith("gantry: error:")]
        assert status == ExitStatus.ERROR, (mistake, out.getvalue(), err.getvalue())
        assert len(errors) == 1 and err.getvalue().strip() == errors[0], err.getvalue()
        assert "terraform.tfvars" in errors[0] and "Traceback" not in err.getvalue()
        assert fake.requests == [] and _tree(deployment.infra) == before
