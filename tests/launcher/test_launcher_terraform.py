"""The python-terraform adapter against the real terraform binary on a provider-free module."""

import io
import shutil
import subprocess
import threading

import pytest
from gantry.errors import TerraformError, TerraformNotFound
from gantry.terraform import Terraform, error_summary
from launcher_helpers import FIXTURE_MODULE, REPO, needs_terraform

# python-terraform 0.10.1 logs failures with the deprecated Logger.warn.
pytestmark = [pytest.mark.terraform, needs_terraform,
              pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning")]


@pytest.fixture
def module(tmp_path):
    target = tmp_path / "module"
    shutil.copytree(FIXTURE_MODULE, target)
    shutil.copy(REPO / "infra" / "variables.tf", target)
    for table in (REPO / "infra").glob("*.json"):  # the tables its rules read (tpu_zones, gpu_shapes)
        shutil.copy(table, target)
    return target


def tfvars(path, **values):
    lines = ['project_id = "demo-project"'] + [f"{k} = {v!r}".replace("'", '"') for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_init_plan_apply_output_destroy(module, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    tf = Terraform(module, stdout=out, stderr=err)
    var_file = tfvars(tmp_path / "two.tfvars", node_count=2)
    tf.init()
    assert "Terraform has been successfully initialized" in out.getvalue()
    assert tf.outputs() == {}
    assert tf.state_list() == []
    assert tf.plan(var_file) is True
    assert "4 to add" in out.getvalue()
    tf.apply(var_file)
    assert "Apply complete! Resources: 4 added" in out.getvalue()
    assert tf.outputs() == {"bucket": "demo-project-gantry-runs", "node_names": ["gantry-node-0", "gantry-node-1"],
                            "zone": "us-central1-a"}
    assert tf.plan(var_file) is False  # nothing left to do
    assert len(tf.state_list()) == 4
    tf.destroy(var_file)
    assert "Destroy complete! Resources: 4 destroyed" in out.getvalue()
    assert tf.state_list() == []
    assert "-force" not in out.getvalue() + err.getvalue()


def test_relative_var_file_is_read_from_the_callers_directory(module, tmp_path, monkeypatch):
    tfvars(tmp_path / "rel.tfvars", node_count=1)
    monkeypatch.chdir(tmp_path)
    tf = Terraform(module, stdout=io.StringIO(), stderr=io.StringIO())
    tf.init()
    tf.apply("rel.tfvars")
    assert tf.outputs()["node_names"] == ["gantry-node-0"]


def test_output_streams_while_terraform_runs(module, tmp_path):
    """The node step waits for a file; the test creates it only after reading the step's line
    from the stream, so this finishes only if output reaches us before terraform exits."""
    go = tmp_path / "go"

    class Watcher(io.StringIO):
        seen_before_exit = threading.Event()

        def write(self, text):
            if "node step started" in text and "(local-exec)" in text:
                self.seen_before_exit.set()
                go.touch()
            return super().write(text)

    out = Watcher()
    tf = Terraform(module, stdout=out, stderr=io.StringIO())
    tf.init()
    tf.apply(tfvars(tmp_path / "wait.tfvars", wait_for_file=str(go)))
    assert Watcher.seen_before_exit.is_set()
    assert "Apply complete!" in out.getvalue()


def test_failure_raises_with_terraforms_error_text(module, tmp_path):
    err = io.StringIO()
    tf = Terraform(module, stdout=io.StringIO(), stderr=err)
    tf.init()
    with pytest.raises(TerraformError) as info:
        tf.apply(tfvars(tmp_path / "bad.tfvars", fail_with="Error: googleapi: Error 400: something broke"))
    error = info.value
    assert error.returncode == 1
    assert "something broke" in error.output
    assert "local-exec provisioner error" in error.what
    assert "Error:" in err.getvalue()  # the user saw it live too
    assert "terraform_data.network" in tf.state_list()  # what was created before the failure stays


def test_invalid_configuration_fails_at_plan(module, tmp_path):
    tf = Terraform(module, stdout=io.StringIO(), stderr=io.StringIO())
    tf.init()
    bad = tmp_path / "typo.tfvars"
    bad.write_text('project_id = "demo"\nnode_count = "many"\n')
    with pytest.raises(TerraformError) as info:
        tf.plan(bad)
    assert "node_count" in info.value.output


def test_missing_binary_says_how_to_install(module):
    tf = Terraform(module, binary="terraform-not-installed")
    with pytest.raises(TerraformNotFound) as info:
        tf.init()
    assert "developer.hashicorp.com/terraform/install" in info.value.fix


def test_error_summary_prefers_the_error_line():
    text = "Warning: x\n\n│ Error: Error creating instance: boom\n│ \n│ more\n"
    assert error_summary(text) == "Error creating instance: boom"
    assert error_summary("just a line\n") == "just a line"


def backend(module, path):
    (module / "backend.tf").write_text(f'terraform {{\n  backend "local" {{\n    path = "{path}"\n  }}\n}}\n')


@pytest.mark.parametrize("first_backend", ["none", "local"])
def test_a_changed_backend_after_the_first_apply_is_refused_not_forgotten(module, tmp_path, first_backend):
    """python-terraform's init() passes -reconfigure: with it Terraform silently starts from the new
    (empty) backend, so every deployed resource is orphaned (first_backend "local": a backend.tf
    pointed elsewhere; "none": backend.tf added after an apply with the default local state)."""
    before = tmp_path / "first" / "gantry.tfstate"
    if first_backend == "local":
        backend(module, before)
    else:
        before = module / "terraform.tfstate"
    tf = Terraform(module, stdout=io.StringIO(), stderr=io.StringIO())
    tf.init()
    tf.apply(tfvars(tmp_path / "one.tfvars", node_count=1))
    other = tmp_path / "elsewhere" / "gantry.tfstate"
    backend(module, other)
    with pytest.raises(TerraformError) as info:
        tf.init()
    line = info.value.line()
    assert "backend" in line and f"terraform -chdir={module} init -migrate-state" in line
    assert "\n" not in line
    assert not other.exists()
    assert "terraform_data.network" in before.read_text()  # nothing forgotten
    # The user moves the state as told; from then on init works and the deployment is still known.
    subprocess.run(["terraform", f"-chdir={module}", "init", "-migrate-state", "-force-copy", "-input=false"],
                   check=True, capture_output=True, timeout=120)
    tf.init()
    assert tf.outputs()["node_names"] == ["gantry-node-0"]
    assert "terraform_data.network" in other.read_text()
