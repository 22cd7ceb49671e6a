"""The real `terraform` binary against the stand-in google provider (tools/tf-standin):
init from the mirror, validate, Terraform's own schema errors, plans of creates, updates and
replacements, and apply -> output -> destroy ending in an empty state. The same lifecycle on
the real infra/ runs through the launcher's adapter in test_standin_adapter.py."""

import ipaddress
import json
import re
import shutil

import pytest
from standin_tools import FIXTURES, REPO

pytestmark = pytest.mark.terraform


def fixture_copy(tmp_path, name):
    return shutil.copytree(FIXTURES / name, tmp_path / name)


def test_init_installs_google_8_7_0_from_the_standin_mirror(standin_infra, terraform):
    lock = (standin_infra / ".terraform.lock.hcl").read_text()
    assert 'provider "registry.terraform.io/hashicorp/google"' in lock
    assert 'provider "registry.terraform.io/hashicorp/google-beta"' in lock  # the TPU VM is beta-only in 8.7.0
    assert 'version     = "8.7.0"' in lock
    version = terraform.json(standin_infra, "version", "-json")
    assert version["provider_selections"] == {"registry.terraform.io/hashicorp/google": "8.7.0",
                                              "registry.terraform.io/hashicorp/google-beta": "8.7.0"}
    # The stand-in's hash must never reach a committed lock file: real users' init would refuse the real provider.
    standin_hashes = re.findall(r'"(h1:[^"]+)"', lock)
    committed = REPO / "infra" / ".terraform.lock.hcl"
    assert standin_hashes and not (committed.exists() and any(h in committed.read_text() for h in standin_hashes))


def test_infra_and_examples_validate(standin_infra, terraform, tmp_path):
    assert "The configuration is valid" in terraform(standin_infra, "validate").stdout
    # The tfvars a user starts from must plan as it is.
    plan = terraform(standin_infra, "plan", "-no-color", "-input=false", "-lock=false",
                     "-var-file=terraform.tfvars.example")
    assert "Plan: " in plan.stdout and "google_compute_instance.node[0] will be created" in plan.stdout
    examples = sorted(p for p in (standin_infra / "examples").glob("*") if (p / "main.tf").exists()) \
        if (standin_infra / "examples").is_dir() else []
    for example in [*examples, fixture_copy(tmp_path, "good_config")]:
        terraform(example, "init", "-input=false", "-backend=false")
        assert "The configuration is valid" in terraform(example, "validate").stdout, example


def test_bad_config_fails_with_terraform_own_four_errors(terraform, tmp_path):
    config = fixture_copy(tmp_path, "bad_config")
    terraform(config, "init", "-input=false", "-backend=false")
    result = terraform(config, "validate", "-json", check=False)
    assert result.returncode == 1
    diagnostics = json.loads(result.stdout)["diagnostics"]
    found = {(d["summary"], d["detail"]) for d in diagnostics}
    assert found == {
        ("Unsupported argument", ('An argument named "auto_create_subnetwork" is not expected here. '
                                  'Did you mean "auto_create_subnetworks"?')),
        ("Unsupported block type", 'Blocks of type "max_run_duration" are not expected here.'),
        ("Incorrect attribute value type", 'Inappropriate value for attribute "labels": map of string required.'),
        ("Missing required argument", 'The argument "network" is required, but no definition was found.'),
    }


def test_plan_shows_computed_values_unknown_and_data_sources_fake(terraform, tmp_path):
    config = fixture_copy(tmp_path, "good_config")
    terraform(config, "init", "-input=false", "-backend=false")
    terraform(config, "plan", "-input=false", "-out=tfplan")
    plan = terraform.json(config, "show", "-json", "tfplan")
    node = next(r for r in plan["resource_changes"] if r["address"] == "google_compute_instance.node[0]")
    assert node["change"]["actions"] == ["create"]
    unknown = node["change"]["after_unknown"]
    assert unknown["id"] and unknown["self_link"] and unknown["network_interface"][0]["network_ip"]
    assert node["change"]["after"]["scheduling"][0]["max_run_duration"] == [{"seconds": 3600, "nanos": None}]
    image = plan["planned_values"]["outputs"]["image"]["value"]
    assert "standin" in image and image.startswith("https://www.googleapis.com/compute/v1/projects/ubuntu-os-cloud/")


def test_apply_output_update_replace_destroy(terraform, tmp_path):
    config = fixture_copy(tmp_path, "good_config")
    terraform(config, "init", "-input=false", "-backend=false")
    terraform(config, "apply", "-input=false", "-auto-approve")
    outputs = terraform.json(config, "output", "-json")
    ips = outputs["internal_ips"]["value"]
    assert len(set(ips)) == 2 and all(ipaddress.ip_address(ip) in ipaddress.ip_network("10.42.0.0/24") for ip in ips)
    assert outputs["node_ids"]["value"] == [f"projects/standin-proj/zones/us-central1-a/instances/standin-node-{i}"
                                           for i in range(2)]
    # Re-planning what was applied changes nothing: the stand-in's values are stable.
    assert terraform(config, "plan", "-input=false", "-detailed-exitcode").returncode == 0

    terraform(config, "plan", "-input=false", "-var", "node_count=3", "-var", "node_label=relabelled",
              "-var", "vpc_name=standin-vpc-2", "-out=change")
    actions = {r["address"]: r["change"]["actions"]
               for r in terraform.json(config, "show", "-json", "change")["resource_changes"]}
    assert actions["google_compute_instance.node[0]"] == ["update"]  # labels change in place
    assert actions["google_compute_instance.node[2]"] == ["create"]
    assert actions["google_compute_network.vpc"] == ["delete", "create"]  # a new name replaces
    terraform(config, "apply", "-input=false", "change")
    ips = terraform.json(config, "output", "-json")["internal_ips"]["value"]
    assert len(set(ips)) == 3

    terraform(config, "destroy", "-input=false", "-auto-approve", "-var", "node_count=3",
              "-var", "node_label=relabelled", "-var", "vpc_name=standin-vpc-2")
    assert terraform(config, "state", "list").stdout.strip() == ""
    assert json.loads((config / "terraform.tfstate").read_text())["resources"] == []

