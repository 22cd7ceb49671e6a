"""The launcher's Terraform adapter (gantry.terraform over python-terraform 0.10.1) driving the
real infra/ through init, plan, apply, output and destroy against the stand-in google provider,
with a throwaway copy of infra/ holding the state."""

import io
import ipaddress
import json

import pytest
from standin_tools import copy_repo_tree

pytestmark = [pytest.mark.terraform, pytest.mark.slow]

gantry_terraform = pytest.importorskip("gantry.terraform", reason="the launcher's adapter needs the cloud extra")
from gantry.launches import Cluster  # noqa: E402  (after the skip: the launcher needs the cloud extra)


def test_adapter_runs_the_whole_lifecycle_on_infra(standin_env, tmp_path, monkeypatch):
    for key, value in standin_env.items():  # python-terraform's subprocesses inherit os.environ
        monkeypatch.setenv(key, value)
    infra = copy_repo_tree(tmp_path)
    tfvars = infra / "terraform.tfvars"
    # The widest shape: GPU, Spot, three nodes (a master and two workers).
    tfvars.write_text('project_id = "standin-proj"\ndeployment_name = "adapter"\nuse_gpu = true\n'
                      'spot = true\nmax_run_hours = 4\nnode_count = 3\n')
    out, err = io.StringIO(), io.StringIO()
    tf = gantry_terraform.Terraform(infra, stdout=out, stderr=err)

    tf.init()
    assert "hashicorp/google v8.7.0" in out.getvalue()
    assert tf.plan(tfvars) is True  # everything is still to create
    assert tf.outputs() == {} and tf.state_list() == []

    tf.apply(tfvars)
    outputs = tf.outputs()
    assert outputs["node_names"] == ["adapter-node-0", "adapter-node-1", "adapter-node-2"]
    assert outputs["node_zones"] == ["us-central1-a"] * 3 and outputs["use_gpu"] is True
    subnet = ipaddress.ip_network("10.42.0.0/24")  # infra's default subnet_cidr
    assert ipaddress.ip_address(outputs["master_address"]) in subnet
    # every node's address in rank order (GANTRY_NODE_IPS), node 0's the master's
    addresses = outputs["node_addresses"]
    assert len(set(addresses)) == 3 and addresses[0] == outputs["master_address"]
    assert all(ipaddress.ip_address(a) in subnet for a in addresses)
    assert Cluster.from_outputs(outputs).node_addrs == tuple(addresses)
    assert outputs["bucket"] == "standin-proj-adapter-runs"
    assert outputs["image_repository_url"] == "us-central1-docker.pkg.dev/standin-proj/adapter"
    assert "google_compute_instance.node[2]" in tf.state_list()
    assert tf.plan(tfvars) is False  # applied == configured: no drift

    tf.destroy(tfvars)
    assert tf.state_list() == []
    assert tf.outputs() == {}
    assert json.loads((infra / "terraform.tfstate").read_text())["resources"] == []


def test_adapter_applies_and_destroys_the_tpu_path(standin_env, tmp_path, monkeypatch):
    """use_tpu: one TPU VM (google-beta) and no compute instance, its outputs what the launcher reads."""
    for key, value in standin_env.items():
        monkeypatch.setenv(key, value)
    infra = copy_repo_tree(tmp_path)
    tfvars = infra / "terraform.tfvars"
    tfvars.write_text('project_id = "standin-proj"\ndeployment_name = "tpu"\nuse_tpu = true\ntpu_type = "v3-8"\n'
                      'spot = true\nmax_run_hours = 4\n')
    out, err = io.StringIO(), io.StringIO()
    tf = gantry_terraform.Terraform(infra, stdout=out, stderr=err)

    tf.init()
    assert "hashicorp/google-beta v8.7.0" in out.getvalue()
    tf.apply(tfvars)
    outputs = tf.outputs()
    assert outputs["node_names"] == ["tpu-node-0"] and outputs["node_zones"] == ["us-central1-a"]
    assert ipaddress.ip_address(outputs["master_address"]) in ipaddress.ip_network("10.42.0.0/24")
    assert outputs["node_addresses"] == [outputs["master_address"]]  # one TPU VM, its worker 0
    assert outputs["use_tpu"] is True and Cluster.from_outputs(outputs).flavour == "tpu"  # gantry-trainer:tpu runs
    state = tf.state_list()
    assert "google_tpu_v2_vm.node[0]" in state and not any(a.startswith("google_compute_instance.") for a in state)
    assert tf.plan(tfvars) is False  # applied == configured: no drift

    tf.destroy(tfvars)
    assert tf.state_list() == []
