# Every validation error: a bad combination fails at plan time with a message naming the fix.

run "c4_type_with_use_gpu" {
  command = plan
  variables {
    use_gpu          = true
    gpu_machine_type = "c4-highcpu-16"
  }
  expect_failures = [var.gpu_machine_type]
}

run "n1_type_without_use_gpu" {
  command = plan
  variables {
    cpu_machine_type = "n1-standard-8"
  }
  expect_failures = [var.cpu_machine_type]
}

run "non_c4_cpu_shape_without_override" {
  command = plan
  variables {
    cpu_machine_type = "n2-standard-16"
  }
  expect_failures = [var.cpu_machine_type]
}

run "c4_size_that_does_not_exist" {
  command = plan
  variables {
    cpu_machine_type = "c4-highcpu-22"
  }
  expect_failures = [var.cpu_machine_type]
}

# Google's C4 table has -lssd shapes for standard and highmem only (issue #32): c4-highcpu-N-lssd is no shape.
run "c4_highcpu_lssd_is_not_a_shape" {
  command = plan
  variables {
    cpu_machine_type = "c4-highcpu-16-lssd"
  }
  expect_failures = [var.cpu_machine_type]
}

run "c4_lssd_below_four_vcpus_is_not_a_shape" {
  command = plan
  variables {
    cpu_machine_type = "c4-standard-2-lssd"
  }
  expect_failures = [var.cpu_machine_type]
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

run "node_count_zero" {
  command = plan
  variables {
    node_count = 0
  }
  expect_failures = [var.node_count]
}

run "node_count_fractional" {
  command = plan
  variables {
    node_count = 1.5
  }
  expect_failures = [var.node_count]
}

run "unknown_accelerator" {
  command = plan
  variables {
    use_gpu          = true
    accelerator_type = "nvidia-l4"
  }
  expect_failures = [var.accelerator_type]
}

# The CUDA image's torch is a CUDA 13 build (docker/torch.json): no kernels below compute capability 7.5, so the
# N1 GPUs older than the T4 (P4 6.1, P100 6.0, V100 7.0) would boot and then fail at the first kernel.
run "a_gpu_the_cuda_13_torch_has_no_kernels_for" {
  command = plan
  variables {
    use_gpu          = true
    accelerator_type = "nvidia-tesla-v100"
  }
  expect_failures = [var.accelerator_type]
}

run "accelerator_count_three" {
  command = plan
  variables {
    use_gpu           = true
    accelerator_count = 3
  }
  expect_failures = [var.accelerator_count]
}

run "boot_disk_too_small" {
  command = plan
  variables {
    boot_disk_size_gb = 20
  }
  expect_failures = [var.boot_disk_size_gb]
}

run "max_run_hours_negative" {
  command = plan
  variables {
    max_run_hours = -1
  }
  expect_failures = [var.max_run_hours]
}

run "spot_without_max_run_hours" {
  command = plan
  variables {
    spot          = true
    max_run_hours = 0
  }
  expect_failures = [var.spot]
}

run "termination_action_unknown" {
  command = plan
  variables {
    termination_action = "SUSPEND"
  }
  expect_failures = [var.termination_action]
}

run "cpu_image_without_project" {
  command = plan
  variables {
    cpu_image = "ubuntu-2404-lts-amd64"
  }
  expect_failures = [var.cpu_image]
}
