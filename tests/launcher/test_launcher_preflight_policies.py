"""Preflight's CPU and disk quotas for Spot and C4, and the organisation policies that break the kit,
answered by the fake Compute API and the fake Resource Manager (getEffectiveOrgPolicy's real shape)."""

import pytest
from gantry.status import ExitStatus
from launcher_helpers import needs_terraform
from local_cloud.googleapis import error

# gantry reads infra/ through the terraform binary: skip, not fail, where there is none (the dev container)
pytestmark = [pytest.mark.terraform, needs_terraform]


def test_spot_c4_draws_on_preemptible_cpus_not_c4_cpus(cli, deployment, fake):
    region = fake.region_quotas["us-central1"]
    region["C4_CPUS"] = (0, 0)
    region["CPUS"] = (0, 0)
    region["PREEMPTIBLE_CPUS"] = (64, 0)
    deployment.write(spot=True, max_run_hours=4)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert "[ ok ] quota PREEMPTIBLE_CPUS (us-central1): need 16, free 64" in result.stdout
    assert "quota C4_CPUS" not in result.stdout


def test_c4_blocks_only_when_cpus_and_c4_cpus_both_fall_short(cli, deployment, fake):
    region = fake.region_quotas["us-central1"]
    region["C4_CPUS"] = (8, 0)
    deployment.write()
    one_short = cli("preflight")
    assert one_short.status == ExitStatus.OK, one_short.output
    assert "[warn] quota C4_CPUS (us-central1): need 16 (1 node(s)), limit 8, in use 0: short by 8" in one_short.stdout
    assert "may count against CPUS instead" in one_short.stdout
    region["CPUS"] = (12, 4)
    both_short = cli("preflight")
    assert both_short.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] quota C4_CPUS (us-central1)" in both_short.stdout
    assert "[FAIL] quota CPUS (us-central1): need 16 (1 node(s)), limit 12, in use 4: short by 8" in both_short.stdout


def test_boot_disk_quota_hyperdisk_for_c4_and_ssd_for_n1(cli, deployment, fake):
    region = fake.region_quotas["us-central1"]
    region["HYPERDISK_BALANCED_TOTAL_GB"] = (250, 100)
    region["HYPERDISK_BALANCED_HIGH_AVAILABILITY_TOTAL_GB"] = (0, 0)  # sorts first; C4 boot disks do not draw on it
    deployment.write(node_count=2, boot_disk_size_gb=100)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert ("[FAIL] quota HYPERDISK_BALANCED_TOTAL_GB (us-central1): need 200 (2 node(s)), limit 250, in use 100: "
            "short by 50") in result.stdout
    assert "HIGH_AVAILABILITY" not in result.stdout
    region["SSD_TOTAL_GB"] = (100, 0)
    deployment.write(use_gpu=True, node_count=2, boot_disk_size_gb=100)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] quota SSD_TOTAL_GB (us-central1): need 200 (2 node(s)), limit 100" in result.stdout
    assert "--quota-id=SSD-TOTAL-GB-per-project-region" in result.stdout


def test_enforced_org_policies_are_blockers_that_say_what_they_break(cli, deployment, apis):
    apis.policies["compute.disableGuestAttributesAccess"] = {"booleanPolicy": {"enforced": True}}
    apis.policies["compute.disableInstanceDataAccessApis"] = {"booleanPolicy": {"enforced": True}}
    apis.policies["compute.requireShieldedVm"] = {"booleanPolicy": {"enforced": True}}
    apis.policies["compute.trustedImageProjects"] = {"listPolicy": {"allowedValues": ["projects/my-images"]}}
    deployment.write()
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    out = result.stdout
    assert "[FAIL] org policy compute.disableGuestAttributesAccess: enforced: nodes report" in out
    assert "`make status`" in out
    assert "[FAIL] org policy compute.disableInstanceDataAccessApis: enforced: getSerialPortOutput is refused" in out
    assert "compute.requireShieldedVm" not in out  # the CPU path boots Ubuntu, which is fine with Secure Boot
    assert "the boot image project ubuntu-os-cloud is not trusted" in out
    assert ("gcloud resource-manager org-policies allow compute.trustedImageProjects projects/ubuntu-os-cloud "
            "--project=demo-project") in out
    assert any(r.startswith("POST /v1/projects/demo-project:getEffectiveOrgPolicy") for r in apis.requests)
    assert result.stderr.startswith("gantry: error: preflight found 3 blocker(s)")


def test_gpu_path_checks_shielded_vm_and_the_deep_learning_image_project(cli, deployment, apis):
    apis.policies["compute.requireShieldedVm"] = {"booleanPolicy": {"enforced": True}}
    apis.policies["compute.trustedImageProjects"] = {
        "listPolicy": {"allowedValues": ["is:projects/deeplearning-platform-release", "projects/ubuntu-os-cloud"]}}
    deployment.write(use_gpu=True)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] org policy compute.requireShieldedVm: enforced: every new VM must have Secure Boot on" in result.stdout
    assert "trustedImageProjects" not in result.stdout.replace("none of", "")


def test_no_org_policy_is_a_pass_and_a_403_is_a_warning(cli, deployment, apis):
    deployment.write()
    clean = cli("preflight")
    assert clean.status == ExitStatus.OK, clean.output
    assert "[ ok ] org policies: none of compute.disableGuestAttributesAccess" in clean.stdout
    apis.errors[r":getEffectiveOrgPolicy$"] = (403, error(
        403, "PERMISSION_DENIED", "The caller does not have permission"))
    refused = cli("preflight")
    assert refused.status == ExitStatus.OK, refused.output
    assert ("[warn] org policies: not checked: reading compute.disableGuestAttributesAccess was refused (403: "
            "The caller does not have permission)") in refused.stdout
    assert "roles/orgpolicy.policyViewer" in refused.stdout
