# Every use_gpu x spot combination, plus max_run_hours and the deliberate non-C4 override.
# Offline: the module has no provider, so `terraform test` needs no download.
# The module has no defaults (the root passes every input): these inputs are the shape a tfvars
# file with no shape settings gets, and each run changes what it tests. The rules of the inputs
# are the root's (infra/variables.tf), tested in tests/infra/test_infra_shape_rules.py.

variables {
  use_gpu                = false
  node_count             = 1
  cpu_machine_type       = "c4-highcpu-16"
  gpu_machine_type       = ""
  allow_non_c4_cpu_shape = false
  accelerator_type       = "nvidia-tesla-t4"
  accelerator_count      = 1
  boot_disk_size_gb      = 100
  cpu_image              = "ubuntu-os-cloud/ubuntu-2404-lts-amd64"
  gpu_image_project      = "deeplearning-platform-release"
  gpu_image_family       = "common-cu129-ubuntu-2204-nvidia-580"
  spot                   = false
  max_run_hours          = 6
  termination_action     = "STOP"
}

run "cpu_on_demand_defaults" {
  command = plan

  assert {
    condition     = output.machine_type == "c4-highcpu-16"
    error_message = "A tfvars file with no shape settings gets c4-highcpu-16 on the CPU path."
  }
  assert {
    condition     = output.boot_disk_type == "hyperdisk-balanced"
    error_message = "C4 refuses pd-* disks: the boot disk must be hyperdisk-balanced."
  }
  assert {
    condition     = output.nic_type == "GVNIC"
    error_message = "C4 requires gVNIC."
  }
  assert {
    condition     = output.image == "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
    error_message = "The CPU path boots the Ubuntu LTS family."
  }
  assert {
    condition     = length(output.guest_accelerators) == 0 && output.accelerator == "none"
    error_message = "The CPU path attaches no GPU (not even a count = 0 block)."
  }
  assert {
    condition = jsonencode(output.scheduling) == jsonencode({
      provisioning_model          = "STANDARD"
      preemptible                 = false
      automatic_restart           = true
      on_host_maintenance         = "MIGRATE"
      instance_termination_action = "STOP"
      max_run_duration_seconds    = 21600
    })
    error_message = "An on-demand CPU node live-migrates and restarts automatically; by default GCE stops it after max_run_hours = 6 (21600 s)."
  }
  assert {
    condition     = output.enable_secure_boot && jsonencode(output.node_indexes) == "[0]"
    error_message = "The CPU path boots with Secure Boot; node_count 1 means one node, index 0."
  }
  assert {
    condition     = !output.compact_placement
    error_message = "A single node needs no placement policy."
  }
}

run "cpu_spot" {
  command = plan

  variables {
    spot          = true
    node_count    = 3
    max_run_hours = 2
  }

  assert {
    condition     = output.machine_type == "c4-highcpu-16" && output.boot_disk_type == "hyperdisk-balanced"
    error_message = "Spot does not change the shape."
  }
  assert {
    condition = jsonencode(output.scheduling) == jsonencode({
      provisioning_model          = "SPOT"
      preemptible                 = true
      automatic_restart           = false
      on_host_maintenance         = "TERMINATE"
      instance_termination_action = "STOP"
      max_run_duration_seconds    = 7200
    })
    error_message = "Spot needs SPOT, preemptible, no automatic restart, TERMINATE, a termination action and its run limit."
  }
  assert {
    condition     = jsonencode(output.node_indexes) == "[0,1,2]"
    error_message = "node_count 3 means indexes 0, 1, 2."
  }
  assert {
    condition     = output.compact_placement
    error_message = "Three C4 nodes get a compact placement policy."
  }
}

run "gpu_on_demand" {
  command = plan

  variables {
    use_gpu = true
  }

  assert {
    condition     = output.machine_type == "n1-standard-8" && output.machine_family == "n1"
    error_message = "The GPU path must default to n1-standard-8."
  }
  assert {
    condition     = jsonencode(output.guest_accelerators) == jsonencode([{ count = 1, type = "nvidia-tesla-t4" }])
    error_message = "The GPU path attaches one nvidia-tesla-t4."
  }
  assert {
    condition     = output.accelerator == "1x nvidia-tesla-t4"
    error_message = "The cost-estimate accelerator string is wrong."
  }
  assert {
    condition     = output.boot_disk_type == "pd-balanced" && output.nic_type == "GVNIC"
    error_message = "N1 has no hyperdisk-balanced; the GPU path uses gVNIC too."
  }
  assert {
    condition     = output.image == "projects/deeplearning-platform-release/global/images/family/common-cu129-ubuntu-2204-nvidia-580"
    error_message = "The GPU path boots a Deep Learning VM family with the NVIDIA driver baked in."
  }
  assert {
    condition = jsonencode(output.scheduling) == jsonencode({
      provisioning_model          = "STANDARD"
      preemptible                 = false
      automatic_restart           = true
      on_host_maintenance         = "TERMINATE"
      instance_termination_action = "STOP"
      max_run_duration_seconds    = 21600
    })
    error_message = "A GPU node cannot live-migrate: on_host_maintenance must be TERMINATE; by default GCE stops it after 6 h."
  }
  assert {
    condition     = !output.enable_secure_boot
    error_message = "Secure Boot is off on the GPU path (the NVIDIA module may be unsigned)."
  }
}

run "cpu_on_demand_two_nodes_placed_compactly" {
  command = plan

  variables {
    node_count = 2
  }

  assert {
    condition     = output.compact_placement && output.scheduling.on_host_maintenance == "TERMINATE" && output.scheduling.automatic_restart
    error_message = "Two on-demand C4 nodes: compact placement, which allows no live migration (TERMINATE), and automatic restart after a host event."
  }
}

run "gpu_two_nodes_without_placement" {
  command = plan

  variables {
    use_gpu    = true
    node_count = 2
  }

  assert {
    condition     = !output.compact_placement && output.nic_type == "GVNIC"
    error_message = "N1 takes no compact placement policy; its nodes still use gVNIC."
  }
}

run "gpu_spot_with_max_run_hours" {
  command = plan

  variables {
    use_gpu            = true
    spot               = true
    max_run_hours      = 6
    termination_action = "DELETE"
    accelerator_count  = 2
    gpu_machine_type   = "n1-highmem-16"
  }

  assert {
    condition     = output.machine_type == "n1-highmem-16" && jsonencode(output.guest_accelerators) == jsonencode([{ count = 2, type = "nvidia-tesla-t4" }])
    error_message = "gpu_machine_type and accelerator_count must pass through."
  }
  assert {
    condition = jsonencode(output.scheduling) == jsonencode({
      provisioning_model          = "SPOT"
      preemptible                 = true
      automatic_restart           = false
      on_host_maintenance         = "TERMINATE"
      instance_termination_action = "DELETE"
      max_run_duration_seconds    = 21600
    })
    error_message = "Spot GPU with max_run_hours = 6 must carry a 21600 s max_run_duration and DELETE."
  }
}

run "cpu_on_demand_with_max_run_hours" {
  command = plan

  variables {
    max_run_hours = 1.5
  }

  assert {
    condition     = output.scheduling.max_run_duration_seconds == 5400
    error_message = "max_run_hours 1.5 is 5400 s."
  }
  assert {
    condition     = output.scheduling.instance_termination_action == "STOP" && output.scheduling.provisioning_model == "STANDARD"
    error_message = "A max run duration needs a termination action, even on a standard VM."
  }
}

run "non_c4_cpu_shape_deliberately" {
  command = plan

  variables {
    cpu_machine_type       = "n2-standard-16"
    allow_non_c4_cpu_shape = true
  }

  assert {
    condition     = output.machine_type == "n2-standard-16" && output.boot_disk_type == "pd-balanced"
    error_message = "An overridden non-C4 shape gets pd-balanced (N2 has no hyperdisk-balanced)."
  }
}

run "image_overrides" {
  command = plan

  variables {
    cpu_image = "ubuntu-os-cloud/ubuntu-2204-lts"
  }

  assert {
    condition     = output.image_project == "ubuntu-os-cloud" && output.image_family == "ubuntu-2204-lts"
    error_message = "cpu_image PROJECT/FAMILY must be split into project and family."
  }
}

run "c4_standard_and_highmem_lssd_are_shapes" {
  command = plan
  variables {
    cpu_machine_type = "c4-standard-8-lssd"
  }
  assert {
    condition     = output.machine_type == "c4-standard-8-lssd"
    error_message = "c4-standard-8-lssd is a C4 shape (local SSD)."
  }
}

# The accelerator-optimized families: the machine type carries the GPUs (infra/gpu_shapes.json), so an empty
# gpu_machine_type is the first shape the table lists for the count, and no guest_accelerator block is sent.
run "l4_on_g2" {
  command = plan

  variables {
    use_gpu          = true
    accelerator_type = "nvidia-l4"
  }

  assert {
    condition     = output.machine_type == "g2-standard-8" && output.machine_family == "g2" && length(output.guest_accelerators) == 0
    error_message = "One L4 is a g2-standard-8, its GPU carried by the machine type (no guest_accelerator)."
  }
  assert {
    condition     = output.boot_disk_type == "pd-balanced" && output.accelerator == "1x nvidia-l4" && output.scheduling.on_host_maintenance == "TERMINATE"
    error_message = "G2 boots from pd-balanced (no pd-standard, no hyperdisk-balanced) and cannot live-migrate."
  }
}

run "four_a100_on_a2" {
  command = plan

  variables {
    use_gpu           = true
    accelerator_type  = "nvidia-tesla-a100"
    accelerator_count = 4
  }

  assert {
    condition     = output.machine_type == "a2-highgpu-4g" && length(output.guest_accelerators) == 0 && output.accelerator == "4x nvidia-tesla-a100"
    error_message = "Four A100s are an a2-highgpu-4g."
  }
}

run "eight_h100_spot" {
  command = plan

  variables {
    use_gpu           = true
    spot              = true
    accelerator_type  = "nvidia-h100-80gb"
    accelerator_count = 8
    node_count        = 2
  }

  assert {
    condition     = output.machine_type == "a3-highgpu-8g" && output.compact_placement && output.scheduling.provisioning_model == "SPOT"
    error_message = "Eight H100s are an a3-highgpu-8g; two of them are placed compactly."
  }
}
