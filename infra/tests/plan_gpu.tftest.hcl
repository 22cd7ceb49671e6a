# The GPU path (use_gpu = true) for every spot x node_count (1, 2), against the stand-in google
# provider; see plan_cpu.tftest.hcl for how this runs and what the CPU path checks.

variables {
  project_id      = "standin-proj"
  deployment_name = "gantry-test"
}


run "gpu_standard_1_node" {
  command = plan

  variables {
    use_gpu            = true
    spot               = false
    node_count         = 1
    max_run_hours      = 0
    termination_action = "STOP"
  }
  assert {
    condition     = length(google_compute_instance.node) == 1 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "1 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "n1-") && length(n.guest_accelerator) == 1 && n.guest_accelerator[0].type == "nvidia-tesla-t4" && n.guest_accelerator[0].count == 1])
    error_message = "The GPU path is N1 with one nvidia-tesla-t4."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "GPU nodes cannot live-migrate: on_host_maintenance must be TERMINATE."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "deeplearning-platform-release" && data.google_compute_image.boot.family == "common-cu129-ubuntu-2204-nvidia-580" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The GPU path boots the image plan resolved from a supported Deep Learning VM family (driver baked in)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "STANDARD" && !one(n.scheduling).preemptible && one(n.scheduling).automatic_restart])
    error_message = "Standard nodes: STANDARD provisioning that restarts after a host event."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : length(one(n.scheduling).max_run_duration) == 0])
    error_message = "max_run_hours = 0 sets no max_run_duration."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).instance_termination_action == null])
    error_message = "A standard node with no run limit sends no termination action (GCE refuses one)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.network_interface).nic_type == "GVNIC"])
    error_message = "GPU nodes use gVNIC too (faster than virtio-net for gloo/nccl between nodes)."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 0 && alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 0])
    error_message = "N1 takes no compact placement policy: the GPU path places no policy, whatever node_count."
  }
}


run "gpu_standard_2_nodes" {
  command = plan

  variables {
    use_gpu            = true
    spot               = false
    node_count         = 2
    max_run_hours      = 4
    termination_action = "DELETE"
  }
  assert {
    condition     = length(google_compute_instance.node) == 2 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "2 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "n1-") && length(n.guest_accelerator) == 1 && n.guest_accelerator[0].type == "nvidia-tesla-t4" && n.guest_accelerator[0].count == 1])
    error_message = "The GPU path is N1 with one nvidia-tesla-t4."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "GPU nodes cannot live-migrate: on_host_maintenance must be TERMINATE."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "deeplearning-platform-release" && data.google_compute_image.boot.family == "common-cu129-ubuntu-2204-nvidia-580" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The GPU path boots the image plan resolved from a supported Deep Learning VM family (driver baked in)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "STANDARD" && !one(n.scheduling).preemptible && one(n.scheduling).automatic_restart])
    error_message = "Standard nodes: STANDARD provisioning that restarts after a host event."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.scheduling).max_run_duration).seconds == 14400 && one(n.scheduling).instance_termination_action == "DELETE"])
    error_message = "max_run_hours = 4 sets a GCE-enforced max_run_duration of 14400 s with the chosen termination action."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.network_interface).nic_type == "GVNIC"])
    error_message = "GPU nodes use gVNIC too (faster than virtio-net for gloo/nccl between nodes)."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 0 && alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 0])
    error_message = "N1 takes no compact placement policy: the GPU path places no policy, whatever node_count."
  }
}


run "gpu_spot_1_node" {
  command = plan

  variables {
    use_gpu            = true
    spot               = true
    node_count         = 1
    max_run_hours      = 2
    termination_action = "STOP"
  }
  assert {
    condition     = length(google_compute_instance.node) == 1 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "1 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "n1-") && length(n.guest_accelerator) == 1 && n.guest_accelerator[0].type == "nvidia-tesla-t4" && n.guest_accelerator[0].count == 1])
    error_message = "The GPU path is N1 with one nvidia-tesla-t4."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "GPU nodes cannot live-migrate: on_host_maintenance must be TERMINATE."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "deeplearning-platform-release" && data.google_compute_image.boot.family == "common-cu129-ubuntu-2204-nvidia-580" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The GPU path boots the image plan resolved from a supported Deep Learning VM family (driver baked in)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "SPOT" && one(n.scheduling).preemptible && !one(n.scheduling).automatic_restart && one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "Spot nodes: SPOT provisioning, preemptible, no automatic restart, TERMINATE on maintenance."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.scheduling).max_run_duration).seconds == 7200])
    error_message = "Spot nodes carry the GCE-enforced run limit (max_run_hours = 2 is 7200 s)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).instance_termination_action == "STOP"])
    error_message = "Spot nodes carry the chosen termination action."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.network_interface).nic_type == "GVNIC"])
    error_message = "GPU nodes use gVNIC too (faster than virtio-net for gloo/nccl between nodes)."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 0 && alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 0])
    error_message = "N1 takes no compact placement policy: the GPU path places no policy, whatever node_count."
  }
}


run "gpu_spot_2_nodes" {
  command = plan

  variables {
    use_gpu            = true
    spot               = true
    node_count         = 2
    max_run_hours      = 4
    termination_action = "DELETE"
  }
  assert {
    condition     = length(google_compute_instance.node) == 2 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "2 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "n1-") && length(n.guest_accelerator) == 1 && n.guest_accelerator[0].type == "nvidia-tesla-t4" && n.guest_accelerator[0].count == 1])
    error_message = "The GPU path is N1 with one nvidia-tesla-t4."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "GPU nodes cannot live-migrate: on_host_maintenance must be TERMINATE."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "deeplearning-platform-release" && data.google_compute_image.boot.family == "common-cu129-ubuntu-2204-nvidia-580" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The GPU path boots the image plan resolved from a supported Deep Learning VM family (driver baked in)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "SPOT" && one(n.scheduling).preemptible && !one(n.scheduling).automatic_restart && one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "Spot nodes: SPOT provisioning, preemptible, no automatic restart, TERMINATE on maintenance."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.scheduling).max_run_duration).seconds == 14400 && one(n.scheduling).instance_termination_action == "DELETE"])
    error_message = "max_run_hours = 4 sets a GCE-enforced max_run_duration of 14400 s with the chosen termination action."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.network_interface).nic_type == "GVNIC"])
    error_message = "GPU nodes use gVNIC too (faster than virtio-net for gloo/nccl between nodes)."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 0 && alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 0])
    error_message = "N1 takes no compact placement policy: the GPU path places no policy, whatever node_count."
  }
}

# An accelerator-optimized family: one L4 is a g2-standard-8 (infra/gpu_shapes.json), the GPU carried by the
# machine type, so the instance sends no guest_accelerator block; the Deep Learning VM image and TERMINATE as on N1.
run "l4_on_g2_spot" {
  command = plan

  variables {
    use_gpu          = true
    accelerator_type = "nvidia-l4"
    spot             = true
    max_run_hours    = 6
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.machine_type == "g2-standard-8" && length(n.guest_accelerator) == 0])
    error_message = "One L4 is a g2-standard-8 with no guest_accelerator block."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).on_host_maintenance == "TERMINATE" && one(n.scheduling).provisioning_model == "SPOT" && one(one(n.boot_disk).initialize_params).type == "pd-balanced"])
    error_message = "A Spot G2 node terminates on host events and boots from pd-balanced (G2 takes no pd-standard)."
  }
}
