# The TPU path (use_tpu = true): one google_tpu_v2_vm (google-beta) in place of the C4/N1 VMs, on
# the deployment's private subnet, with the node account, labels, tag and boot contract of the VMs;
# then the TPU inputs that must fail. Planned offline against the stand-in google and google-beta
# providers (docs/STANDIN.md); see plan_cpu.tftest.hcl for how this runs.

variables {
  project_id      = "standin-proj"
  deployment_name = "gantry-test"
  use_tpu         = true
  max_run_hours   = 8
}

run "tpu_v3_8_standard" {
  command = plan

  # The account's email and the network ids are known only after apply; pin them so the plan can
  # prove the TPU VM references exactly these objects.
  override_resource {
    target          = google_service_account.node
    override_during = plan
    values          = { email = "gantry-test-node@standin-proj.iam.gserviceaccount.com" }
  }
  override_resource {
    target          = google_compute_network.vpc
    override_during = plan
    values          = { id = "projects/standin-proj/global/networks/gantry-test-vpc" }
  }
  override_resource {
    target          = google_compute_subnetwork.nodes
    override_during = plan
    values          = { id = "projects/standin-proj/regions/us-central1/subnetworks/gantry-test-nodes" }
  }

  variables {
    region   = "us-central1"
    zone     = "us-central1-a"
    tpu_type = "v3-8"
    spot     = false
  }
  assert {
    condition     = length(google_tpu_v2_vm.node) == 1 && length(google_compute_instance.node) == 0
    error_message = "use_tpu creates one TPU VM and no C4/N1 instance."
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].accelerator_type == "v3-8" && google_tpu_v2_vm.node[0].zone == "us-central1-a"
    error_message = "The TPU VM has the requested tpu_type in the requested zone."
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].runtime_version == "tpu-ubuntu2204-base"
    error_message = "v2/v3/v4 default to the tpu-ubuntu2204-base runtime (Google's PyTorch/JAX base for v4 and older)."
  }
  assert {
    condition     = one(google_tpu_v2_vm.node[0].network_config).enable_external_ips == false
    error_message = "The TPU VM has no external IP."
  }
  assert {
    condition     = one(google_tpu_v2_vm.node[0].network_config).subnetwork == "projects/standin-proj/regions/us-central1/subnetworks/gantry-test-nodes" && one(google_tpu_v2_vm.node[0].network_config).network == "projects/standin-proj/global/networks/gantry-test-vpc"
    error_message = "The TPU VM sits on the deployment's own VPC and subnet."
  }
  assert {
    condition     = one(google_tpu_v2_vm.node[0].service_account).email == "gantry-test-node@standin-proj.iam.gserviceaccount.com"
    error_message = "The TPU VM runs as the node service account."
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].labels["gantry-deployment"] == "gantry-test" && google_tpu_v2_vm.node[0].labels["gantry-role"] == "master"
    error_message = "The TPU VM carries the gantry-deployment label and is node 0, the master."
  }
  assert {
    condition     = contains(google_tpu_v2_vm.node[0].tags, "gantry-test-node")
    error_message = "The TPU VM has the node tag, so the IAP SSH and node-to-node firewall rules apply to it."
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].metadata["startup-script"] == module.startup_script.script && google_tpu_v2_vm.node[0].metadata["gantry-agent"] == local.agent_bundle && contains(keys(jsondecode(google_tpu_v2_vm.node[0].metadata["gantry-agent"])), "__main__.py") && google_tpu_v2_vm.node[0].metadata["gantry-contract"] == file("${path.module}/../packages/launch_contract.py")
    error_message = "The TPU VM boots the same startup script, node agent and launch contract as the VMs (local.node_metadata)."
  }
  assert {
    condition     = length(google_tpu_v2_vm.node[0].scheduling_config) == 0
    error_message = "A standard TPU VM sends no scheduling_config."
  }
  assert {
    condition     = contains([for s in google_project_service.required : s.service], "tpu.googleapis.com")
    error_message = "use_tpu enables the Cloud TPU API."
  }
  assert {
    condition     = output.node_names == tolist(["gantry-test-node-0"]) && output.node_zones == tolist(["us-central1-a"])
    error_message = "The launcher's outputs name the TPU VM."
  }
  assert {
    condition     = toset(google_project_iam_custom_role.tpu_self_stop[0].permissions) == toset(["tpu.nodes.get", "tpu.nodes.stop"]) && google_project_iam_custom_role.tpu_self_stop[0].project == "standin-proj"
    error_message = "The TPU node's account may get and stop TPU nodes in this project, nothing more (the agent's nodes:stop)."
  }
  assert {
    condition     = google_project_iam_member.node_tpu_self_stop[0].member == "serviceAccount:gantry-test-node@standin-proj.iam.gserviceaccount.com" && google_project_iam_member.node_tpu_self_stop[0].project == "standin-proj"
    error_message = "The self-stop role goes to the node service account only."
  }
  assert {
    condition     = strcontains(module.startup_script.script, "readonly max_run_hours=\"8\"") && strcontains(module.startup_script.script, "GANTRY_MAX_RUN_HOURS=$max_run_hours")
    error_message = "max_run_hours reaches the agent (GANTRY_MAX_RUN_HOURS), which stops the TPU node after it: Cloud TPU has no run-duration limit."
  }
}

run "tpu_v5e_spot" {
  command = plan

  variables {
    region   = "us-west4"
    zone     = "us-west4-a"
    tpu_type = "v5litepod-8"
    spot     = true
  }
  assert {
    condition     = length(google_tpu_v2_vm.node) == 1 && length(google_compute_instance.node) == 0
    error_message = "use_tpu creates one TPU VM and no C4/N1 instance."
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].accelerator_type == "v5litepod-8" && google_tpu_v2_vm.node[0].zone == "us-west4-a"
    error_message = "The TPU VM has the requested tpu_type in the requested zone."
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].runtime_version == "v2-alpha-tpuv5-lite"
    error_message = "v5e (v5litepod-*) defaults to the v2-alpha-tpuv5-lite runtime."
  }
  assert {
    condition     = one(google_tpu_v2_vm.node[0].scheduling_config).spot == true
    error_message = "spot = true makes the TPU VM a Spot TPU."
  }
  assert {
    condition     = one(google_tpu_v2_vm.node[0].network_config).enable_external_ips == false
    error_message = "The TPU VM has no external IP."
  }
}

run "tpu_runtime_version_override" {
  command = plan

  variables {
    zone                = "us-central1-b"
    tpu_type            = "v2-8"
    tpu_runtime_version = "tpu-vm-tf-2.16.1-pjrt"
  }
  assert {
    condition     = google_tpu_v2_vm.node[0].runtime_version == "tpu-vm-tf-2.16.1-pjrt"
    error_message = "A tpu_runtime_version that is set wins over the default of tpu_type."
  }
}

run "tpu_type_not_offered_in_zone_fails" {
  command = plan

  variables {
    zone     = "us-central1-c" # us-central1 offers v4 nowhere: it is in us-central2-b
    tpu_type = "v4-8"
  }
  expect_failures = [var.tpu_type]
}

run "tpu_with_gpu_fails" {
  command = plan

  variables {
    zone     = "us-central1-b"
    tpu_type = "v2-8"
    use_gpu  = true
  }
  expect_failures = [var.use_tpu]
}

run "tpu_without_run_limit_fails" {
  command = plan

  variables {
    zone          = "us-central1-b"
    tpu_type      = "v2-8"
    max_run_hours = 0
  }
  expect_failures = [var.use_tpu]
}

run "unknown_tpu_type_fails" {
  command = plan

  variables {
    zone     = "us-central1-b"
    tpu_type = "v9-8"
  }
  expect_failures = [var.tpu_type]
}
