"""gantry preflight against a fake Compute API driven by the real google-cloud-compute client."""

import pytest
from gantry.status import ExitStatus
from launcher_helpers import isolated_environ, needs_terraform, run_module
from local_cloud.compute_json import service_disabled
from local_cloud.googleapis import error

# gantry reads infra/ through the terraform binary: skip, not fail, where there is none (the dev container)
pytestmark = [pytest.mark.terraform, needs_terraform]


def test_ready_cpu_deployment_passes_and_prints_cost(cli, deployment, fake):
    deployment.write(node_count=2)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert "[ ok ] credentials: anonymous, for the endpoint http://127.0.0.1:" in result.stdout
    assert "c4-highcpu-16 in us-central1-a: 16 vCPU, 32 GB" in result.stdout
    assert "quota CPUS_ALL_REGIONS (project): need 32, free 72" in result.stdout
    assert "quota C4_CPUS (us-central1): need 32" in result.stdout
    assert "2 nodes in total" in result.stdout and "$/h" not in result.stderr
    assert "Ready" in result.stdout
    # the real client really asked the fake
    assert any(r.startswith("GET /compute/v1/projects/demo-project/zones/us-central1-a/machineTypes/c4-highcpu-16")
               for r in fake.requests)


def test_gpu_quota_zero_names_the_shortfall_and_how_to_raise_it(cli, deployment, fake):
    fake.project_quotas["GPUS_ALL_REGIONS"] = (0, 0)
    fake.region_quotas["us-central1"]["NVIDIA_T4_GPUS"] = (0, 0)
    deployment.write(use_gpu=True, node_count=2)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    out = result.stdout
    assert "[FAIL] quota GPUS_ALL_REGIONS (project): need 2 (2 node(s)), limit 0, in use 0: short by 2" in out
    assert "[FAIL] quota NVIDIA_T4_GPUS (us-central1): need 2" in out
    assert "https://console.cloud.google.com/iam-admin/quotas?project=demo-project" in out
    assert "--quota-id=GPUS-ALL-REGIONS-per-project" in out and "New projects get 0 GPUs;" in out
    assert "--quota-id=NVIDIA-T4-GPUS-per-project-region --dimensions=region=us-central1 --preferred-value=2" in out
    assert result.stderr.startswith("gantry: error: preflight found 2 blocker(s)")
    assert "Traceback" not in result.output


def test_partial_usage_counts_against_the_limit(cli, deployment, fake):
    fake.project_quotas["CPUS_ALL_REGIONS"] = (40, 20)
    deployment.write(node_count=2)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "need 32 (2 node(s)), limit 40, in use 20: short by 12" in result.stdout
    assert "--preferred-value=52" in result.stdout
    # a CPU quota's fix says nothing of GPUs, which a GPU quota's does (new projects have none)
    assert "--email=YOUR_EMAIL. Approval takes minutes to days." in result.stdout and "GPU" not in result.stdout


def test_spot_gpus_use_the_preemptible_quota_when_granted(cli, deployment, fake):
    fake.region_quotas["us-central1"]["NVIDIA_T4_GPUS"] = (0, 0)
    fake.region_quotas["us-central1"]["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (4, 0)
    deployment.write(use_gpu=True, spot=True, max_run_hours=8)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert "quota PREEMPTIBLE_NVIDIA_T4_GPUS (us-central1): need 1" in result.stdout
    assert "Spot" in result.stdout


def test_c4_short_on_cpus_but_not_c4_cpus_is_a_warning(cli, deployment, fake):
    fake.region_quotas["us-central1"]["CPUS"] = (8, 0)
    deployment.write()
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert "[warn] quota CPUS (us-central1)" in result.stdout


def test_missing_machine_type_lists_the_zones_that_have_it(cli, deployment):
    deployment.write(zone="us-central1-f")  # C4 is in a, b, c only
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] machine type: c4-highcpu-16 is not offered in us-central1-f" in result.stdout
    assert "Zones of us-central1 that offer c4-highcpu-16: us-central1-a, us-central1-b, us-central1-c" \
        in result.stdout
    assert 'set zone = "us-central1-a"' in result.stdout
    assert "[ ok ] quota CPUS_ALL_REGIONS (project): need 16" in result.stdout  # sized from the name


def test_a_shape_only_other_regions_offer_names_those_regions(cli, deployment, fake):
    fake.zones["europe-west4-b"] = "europe-west4"
    fake.machine_types["europe-west4-b"] = {"n2-standard-16": (16, 65536)}
    deployment.write(cpu_machine_type="n2-standard-16", allow_non_c4_cpu_shape=True)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "No other zone of us-central1 offers n2-standard-16; these regions do: europe-west4 (europe-west4-b)" \
        in result.stdout
    assert "choose another region" not in result.stdout


def test_a_shape_no_zone_offers_is_called_what_it_is(cli, deployment):
    deployment.write(cpu_machine_type="n2-standard-17", allow_non_c4_cpu_shape=True)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "No zone of any region offers n2-standard-17: it is not a machine type Compute Engine has" \
        in result.stdout
    assert "gcloud compute machine-types list --filter=name:n2-standard-17" in result.stdout


def test_missing_accelerator_lists_the_zones_that_have_the_whole_shape(cli, deployment, fake):
    del fake.accelerator_types["us-central1-a"]["nvidia-tesla-t4"]
    deployment.write(use_gpu=True)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "nvidia-tesla-t4 is not offered in us-central1-a" in result.stdout
    assert "us-central1-b, us-central1-c, us-central1-f" in result.stdout


def test_too_many_gpus_per_vm_is_refused_by_infras_rule_before_any_call(cli, deployment, fake):
    deployment.write(use_gpu=True, accelerator_count=8)
    result = cli("preflight")
    assert result.status == ExitStatus.ERROR and result.stdout == ""
    assert ("accelerator_count = 8. accelerator_count 8 of nvidia-tesla-t4 is not a shape Google offers: a node "
            "takes 1, 2, 4 (infra/gpu_shapes.json)") in result.stderr
    assert fake.requests == []


def test_unknown_zone(cli, deployment):
    deployment.write(zone="us-central1-z")
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "us-central1-a, us-central1-b, us-central1-c, us-central1-f" in result.stdout


def test_disabled_compute_api_names_the_enable_command(cli, deployment, fake):
    fake.errors[r"/projects/demo-project$"] = service_disabled("demo-project")
    deployment.write()
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "Compute Engine API is disabled" in result.stdout
    assert "gcloud services enable compute.googleapis.com --project=demo-project" in result.stdout


def test_wrong_project(cli, deployment):
    deployment.write(project_id="not-mine")
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "project not-mine not found" in result.stdout and "gcloud projects list" in result.stdout


def test_missing_tfvars(cli):
    result = cli("preflight")
    assert result.status == ExitStatus.ERROR
    assert result.stderr.startswith("gantry: error: infra/terraform.tfvars not found. Copy")


def test_no_credentials_says_how_to_log_in(deployment, tmp_path):
    """The real entry point, in a clean environment: no ADC file, no metadata server."""
    deployment.write()
    result = run_module(["preflight"], deployment.root, isolated_environ(tmp_path))
    assert result.returncode == ExitStatus.ERROR
    assert "gantry: error: no Google Cloud credentials found" in result.stderr
    assert "gcloud auth application-default login" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_debug_shows_the_traceback(deployment, tmp_path):
    deployment.write()
    result = run_module(["preflight", "--debug"], deployment.root, isolated_environ(tmp_path))
    assert "Traceback" in result.stderr and "gcloud auth application-default login" in result.stderr


def test_a_retired_gpu_image_family_is_a_blocker_that_lists_the_live_ones(cli, deployment, fake):
    deployment.write(use_gpu=True, gpu_image_family="common-cu128-ubuntu-2204-nvidia-570")
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert ("[FAIL] boot image: image family deeplearning-platform-release/common-cu128-ubuntu-2204-nvidia-570 "
            "has no live image") in result.stdout
    assert "Set gpu_image_family in infra/terraform.tfvars" in result.stdout
    assert "Live families like it: common-cu129-ubuntu-2204-nvidia-580." in result.stdout


def test_the_default_images_of_both_paths_are_live(cli, deployment):
    for use_gpu in (False, True):
        deployment.write(use_gpu=use_gpu)
        result = cli("preflight")
        assert result.status == ExitStatus.OK, result.output
        assert "[ ok ] boot image:" in result.stdout


# Cloud TPU's per-zone quotas for v3 as Cloud Quotas lists them (the Pod one does not cover a v3-8)
V3_ON_DEMAND, V3_SPOT = "TPUV3sPerProjectPerZoneForTPUAPI", "TPUV3sPreemptiblePerProjectPerZoneForTPUAPI"
V3_POD = "TPUV3sPodPerProjectPerZoneForTPUAPI"


def test_a_tpu_deployment_skips_the_vm_checks_and_checks_the_tpu_quota_of_its_zone(cli, deployment, fake, apis):
    apis.quota(V3_ON_DEMAND, {"us-central1-a": 8}, default=0)
    apis.quota(V3_SPOT, {"us-central1-b": 48})
    deployment.write(use_tpu=True, tpu_type="v3-8", max_run_hours=8)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    out = result.stdout
    assert "[ ok ] TPU type: v3-8 in us-central1-a (V3 2x2)" in out
    assert f"[ ok ] TPU quota: on-demand v3 quota in us-central1-a: 8 ({V3_ON_DEMAND})" in out
    assert any(r.startswith("GET /v1/projects/demo-project/locations/global/services/tpu.googleapis.com/quotaInfos")
               for r in apis.requests)
    assert "quota CPUS_ALL_REGIONS" not in out and "c4-highcpu-16" not in out
    assert not any("/machineTypes/" in r for r in fake.requests), "no Compute VM shape lookup for a TPU VM"
    assert any(r.startswith("GET /v2/projects/demo-project/locations/us-central1-a/acceleratorTypes/v3-8")
               for r in apis.requests)
    assert "v3-8 TPU VM (4 chips x $2/chip-h), on-demand" in out


def test_a_tpu_type_the_zone_lacks_is_a_blocker_naming_the_listing_command(cli, deployment, apis):
    apis.tpu_types["us-central1-a"] = ["v5litepod-8"]  # the API is the truth, even where the table disagrees
    deployment.write(use_tpu=True, tpu_type="v3-8", max_run_hours=8)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] TPU type: v3-8 is not offered in us-central1-a" in result.stdout
    assert "gcloud compute tpus accelerator-types list --zone=us-central1-a --project=demo-project" in result.stdout
    assert "preflight found 1 blocker(s): TPU type" in result.stderr


def test_a_disabled_tpu_api_before_the_first_apply_is_a_warning(cli, deployment, apis):
    message = ("Cloud TPU API has not been used in project demo-project before or it is disabled. Enable it by "
               "visiting https://console.developers.google.com/apis/api/tpu.googleapis.com/overview?project=demo-project "
               "then retry.")
    apis.errors[r"/acceleratorTypes/"] = (403, error(403, "PERMISSION_DENIED", message, reason="SERVICE_DISABLED",
                                                     service="tpu.googleapis.com"))
    deployment.write(use_tpu=True, tpu_type="v3-8", max_run_hours=8)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert "[warn] TPU type: the Cloud TPU API did not answer (Cloud TPU API has not been used" in result.stdout
    assert "`make apply` enables tpu.googleapis.com" in result.stdout


def test_a_tpu_quota_of_zero_in_the_zone_is_a_blocker_in_one_line_naming_how_to_get_it(cli, deployment, apis):
    apis.quota(V3_SPOT, {"us-central1-a": None, "us-central1-b": 48}, default=0)  # zeroed here, granted in b
    apis.quota(V3_ON_DEMAND, {"us-central1-a": 8})  # on-demand quota does not cover Spot TPUs
    apis.quota(V3_POD, {"us-central1-a": 2048})  # nor does a Pod quota a v3-8
    deployment.write(use_tpu=True, tpu_type="v3-8", spot=True, max_run_hours=8)
    result = cli("preflight")
    assert result.status == ExitStatus.CHECK_FAILED, result.output
    line = next(x for x in result.stdout.splitlines() if "TPU quota" in x)
    assert line.strip() == (f"[FAIL] TPU quota: preemptible (Spot) v3 quota in us-central1-a is 0 ({V3_SPOT}): "
                            "Cloud TPU would refuse v3-8")
    assert (f"gcloud quotas preferences create --service=tpu.googleapis.com --project=demo-project --quota-id={V3_SPOT} "
            "--dimensions=zone=us-central1-a --preferred-value=8") in result.stdout
    assert "TPU Research Cloud (TRC) allocation, set zone (and region) to a zone its email grants" in result.stdout
    assert "preflight found 1 blocker(s): TPU quota" in result.stderr


def test_a_cloud_quotas_api_that_refuses_leaves_the_tpu_quota_unchecked_not_failed(cli, deployment, apis):
    message = ("Cloud Quotas API has not been used in project demo-project before or it is disabled. Enable it by "
               "visiting https://console.developers.google.com/apis/api/cloudquotas.googleapis.com/overview?project="
               "demo-project then retry.")
    apis.errors[r"/quotaInfos$"] = (403, error(403, "PERMISSION_DENIED", message, reason="SERVICE_DISABLED",
                                               service="cloudquotas.googleapis.com"))
    deployment.write(use_tpu=True, tpu_type="v3-8", max_run_hours=8)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    assert "[warn] TPU quota: not checked: the Cloud Quotas API did not answer (Cloud Quotas API has not been" \
        in result.stdout
    assert "gcloud services enable cloudquotas.googleapis.com --project=demo-project" in result.stdout


def test_gpus_deleted_within_7_days_may_use_the_preemptible_quota(cli, deployment, fake):
    """A new project's 0 T4s: GPU VMs deleted after a run time of 7 days or less may use preemptible GPU quota
    (cloud.google.com/compute/docs/instances/limit-vm-runtime), so either quota passes; without the setting,
    preflight names it."""
    region = fake.region_quotas["us-central1"]
    region["NVIDIA_T4_GPUS"] = (0, 0)
    region["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (4, 0)
    deployment.write(use_gpu=True, node_count=2, termination_action="DELETE", max_run_hours=168)
    eligible = cli("preflight")
    assert eligible.status == ExitStatus.OK, eligible.output
    assert "[ ok ] quota PREEMPTIBLE_NVIDIA_T4_GPUS (us-central1): need 2, free 4" in eligible.stdout
    assert "[warn] quota NVIDIA_T4_GPUS (us-central1): need 2 (2 node(s)), limit 0" in eligible.stdout
    assert "may use PREEMPTIBLE_NVIDIA_T4_GPUS instead" in eligible.stdout

    deployment.write(use_gpu=True, node_count=2, termination_action="STOP", max_run_hours=168)
    stopped = cli("preflight")
    assert stopped.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] quota NVIDIA_T4_GPUS (us-central1): need 2" in stopped.stdout
    assert ('Or use the preemptible GPU quota (PREEMPTIBLE_NVIDIA_T4_GPUS, free 4) without Spot: set '
            'termination_action = "DELETE" and max_run_hours <= 168 in infra/terraform.tfvars') in stopped.stdout

    deployment.write(use_gpu=True, node_count=2, termination_action="DELETE", max_run_hours=169)  # past 7 days
    too_long = cli("preflight")
    assert too_long.status == ExitStatus.CHECK_FAILED
    assert "quota PREEMPTIBLE_NVIDIA_T4_GPUS" not in too_long.stdout

    region["PREEMPTIBLE_NVIDIA_T4_GPUS"] = (1, 0)  # both short: a blocker on each
    deployment.write(use_gpu=True, node_count=2, termination_action="DELETE", max_run_hours=8)
    both_short = cli("preflight")
    assert both_short.status == ExitStatus.CHECK_FAILED
    assert "[FAIL] quota NVIDIA_T4_GPUS (us-central1)" in both_short.stdout
    assert "[FAIL] quota PREEMPTIBLE_NVIDIA_T4_GPUS (us-central1): need 2 (2 node(s)), limit 1" in both_short.stdout


@pytest.mark.parametrize("accelerator_type, machine_type", [
    ("nvidia-l4", "g2-standard-96"),
    ("nvidia-tesla-a100", "a2-highgpu-8g"),
])
def test_an_eight_gpu_node_of_each_family_checks_its_shape_and_its_gpus_quota(cli, deployment, fake, accelerator_type,
                                                                             machine_type):
    """8 x L4 on G2 and 8 x A100 on A2: the machine type infra/gpu_shapes.json derives for the count, offered in the
    zone with its vCPUs and memory as that table has them, and the GPU model's own regional quota."""
    from gantry import gpu_shapes

    vcpus, memory_gb = gpu_shapes.shape(machine_type)
    fake.machine_types["us-central1-a"][machine_type] = (vcpus, int(memory_gb * 1024))
    fake.accelerator_types["us-central1-a"][accelerator_type] = 16 if machine_type.startswith("a2") else 8
    metric, spot_metric = gpu_shapes.quota_metrics(accelerator_type)
    fake.project_quotas.update(CPUS_ALL_REGIONS=(vcpus, 0), GPUS_ALL_REGIONS=(8, 0))
    fake.region_quotas["us-central1"].update({"CPUS": (vcpus, 0), metric: (8, 0), spot_metric: (0, 0)})
    deployment.write(use_gpu=True, accelerator_type=accelerator_type, accelerator_count=8)
    result = cli("preflight")
    assert result.status == ExitStatus.OK, result.output
    out = result.stdout
    assert f"{machine_type} in us-central1-a: {vcpus} vCPU, {memory_gb:.0f} GB" in out, out
    assert f"{accelerator_type} in us-central1-a" in out
    assert f"quota {metric} (us-central1): need 8" in out and f"quota CPUS (us-central1): need {vcpus}" in out
    print(out)  # with -s: what a new user sees (the closing notes quote it)

    fake.region_quotas["us-central1"][metric] = (0, 0)  # a new project: no GPUs of the model yet
    short = cli("preflight")
    assert short.status == ExitStatus.CHECK_FAILED
    assert f"--quota-id={metric.replace('_', '-')}-per-project-region --dimensions=region=us-central1" in short.stdout
