# Bad inputs fail at plan time with the variable's own message, before anything is created
# (run offline against the stand-in google provider, see plan_cpu.tftest.hcl). Each run lists every
# validation its inputs must trip: a listed one that passes, or an unlisted one that fails, fails
# the run. Two runs rather than one a variable, because every run starts a provider.

variables {
  project_id = "standin-proj"
}

run "bad_cpu_path_inputs_fail_their_own_validations" {
  command = plan

  variables {
    project_id         = "Not A Project"
    zone               = "europe-west4-a"   # not in region us-central1
    fallback_zones     = ["europe-west4-b"] # not in region us-central1 either
    node_count         = 0
    cpu_machine_type   = "c4-highcpu-22" # a C3 shape, not C4
    spot               = true
    termination_action = "KILL"
    # (accelerator_type's and max_run_hours' rules are tests/infra/test_infra_shape_rules.py's: zone's GPU rule
    # reads accelerator_type and, through accelerator_count and spot, max_run_hours, and Terraform skips a
    # variable's rules when one of them reads an invalid variable)
  }

  expect_failures = [
    var.project_id,
    var.zone,
    var.fallback_zones,
    var.node_count,
    var.cpu_machine_type,
    var.termination_action,
  ]
}

# (accelerator_count's rule is tests/infra/test_infra_shape_rules.py's: a run with a bad count would not check
# gpu_machine_type, whose rule reads the count, since Terraform skips a rule that reads an invalid variable.)
run "bad_gpu_path_inputs_fail_their_own_validations" {
  command = plan

  variables {
    use_gpu          = true
    gpu_machine_type = "c4-highcpu-16"                    # a T4 attaches only to N1
    fallback_zones   = ["us-central1-b", "us-central1-b"] # named twice
  }

  expect_failures = [
    var.gpu_machine_type,
    var.fallback_zones,
  ]
}

run "the_same_shape_passes_on_the_cpu_path" {
  command = plan

  variables {
    use_gpu          = false
    gpu_machine_type = "c4-highcpu-16" # ignored on the CPU path
  }

  assert {
    condition     = google_compute_instance.node[0].machine_type == "c4-highcpu-16"
    error_message = "gpu_machine_type is validated only when use_gpu = true."
  }
}

run "spot_without_max_run_hours_is_refused" {
  command = plan

  variables {
    spot          = true
    max_run_hours = 0 # a preempted node would leave the others billing until someone notices
  }

  expect_failures = [var.spot]
}
