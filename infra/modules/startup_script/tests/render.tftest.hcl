# The rendered script carries the boot contract; tests/infra also runs shellcheck on it.

variables {
  deployment_name = "gantry"
  registry_host   = "us-central1-docker.pkg.dev"
  # What the root module passes: the CUDA image's CUDA, one fact in docker/torch.json.
  required_cuda_version = jsondecode(file("../../../docker/torch.json")).cuda
}

run "cpu_node_script" {
  command = plan

  variables {
    use_gpu = false
  }

  assert {
    condition     = startswith(output.script, "#!/usr/bin/env bash\n")
    error_message = "The startup script must start with a bash shebang."
  }
  assert {
    condition     = strcontains(output.script, "readonly use_gpu=\"false\"") && strcontains(output.script, "readonly deployment=\"gantry\"")
    error_message = "Template values must be rendered into the script."
  }
  assert {
    condition     = strcontains(output.script, "readonly agent_key=\"gantry-agent\"") && strcontains(output.script, "readonly agent_unit=\"gantry-agent.service\"")
    error_message = "The agent comes from metadata key gantry-agent and runs as gantry-agent.service."
  }
  assert {
    condition     = strcontains(output.script, "readonly agent_log=\"/var/log/gantry-agent.log\"") && strcontains(output.script, "StandardOutput=journal")
    error_message = "The agent logs to journald and /var/log/gantry-agent.log."
  }
  assert {
    condition     = strcontains(output.script, "docker login -u \"oauth2accesstoken\" --password-stdin")
    error_message = "Registry login must use the metadata token, never a password."
  }
}

run "gpu_node_script" {
  command = plan

  variables {
    use_gpu               = true
    required_cuda_version = "12.4"
  }

  assert {
    condition     = strcontains(output.script, "readonly use_gpu=\"true\"") && strcontains(output.script, "readonly required_cuda=\"12.4\"")
    error_message = "GPU nodes get the driver-vs-CUDA check with the required CUDA version."
  }
}

run "contract_outputs" {
  command = plan

  variables {
    use_gpu = false
  }

  assert {
    condition     = output.agent_metadata_key == "gantry-agent" && output.run_metadata_key == "gantry-run" && strcontains(output.script, "readonly agent_home=\"/opt/gantry\"") && strcontains(output.script, "ExecStart=/usr/bin/python3 -u -m $agent_package")
    error_message = "The launcher relies on these names: gantry-agent, gantry-run; the agent runs as python3 -m gantry_agent in /opt/gantry."
  }
  assert {
    condition     = output.contract_metadata_key == "gantry-contract" && strcontains(output.script, "readonly contract_path=\"/opt/gantry/launch_contract.py\"")
    error_message = "The launch contract comes from metadata key gantry-contract and goes beside the agent as launch_contract.py, the name it imports."
  }
}

run "bad_cuda_version" {
  command = plan

  variables {
    use_gpu               = true
    required_cuda_version = "twelve"
  }

  expect_failures = [var.required_cuda_version]
}
