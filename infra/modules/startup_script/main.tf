# The node's boot contract, in one place: which metadata keys carry the agent and the launch contract it
# imports, where they are installed, the systemd unit that runs the agent, where it logs, and the guest-attribute
# namespace that reports boot state. The launcher (packages/gantry) reads the same names from outputs.

locals {
  agent_metadata_key  = "gantry-agent"
  run_metadata_key    = "gantry-run"
  agent_home          = "/opt/gantry" # the agent's working directory: `python3 -m gantry_agent` imports from it
  agent_package       = "gantry_agent"
  agent_unit          = "gantry-agent.service"
  agent_log_path      = "/var/log/gantry-agent.log"
  agent_env_path      = "/etc/gantry/agent.env"
  guest_attribute_ns  = "gantry"
  registry_login_user = "oauth2accesstoken"

  # The launch contract (packages/launch_contract.py) goes beside the agent's package, under its module name:
  # `python3 -m` puts its working directory first on sys.path, so `import launch_contract` needs no install step.
  contract_metadata_key = "gantry-contract"
  contract_path         = "${local.agent_home}/launch_contract.py"

  script = templatefile("${path.module}/templates/startup.sh.tftpl", {
    deployment_name       = var.deployment_name
    use_gpu               = var.use_gpu
    registry_host         = var.registry_host
    idle_shutdown_minutes = var.idle_shutdown_minutes
    max_run_hours         = var.max_run_hours
    required_cuda_version = var.required_cuda_version
    agent_metadata_key    = local.agent_metadata_key
    run_metadata_key      = local.run_metadata_key
    agent_home            = local.agent_home
    agent_package         = local.agent_package
    contract_metadata_key = local.contract_metadata_key
    contract_path         = local.contract_path
    agent_unit            = local.agent_unit
    agent_log_path        = local.agent_log_path
    agent_env_path        = local.agent_env_path
    guest_attribute_ns    = local.guest_attribute_ns
    registry_login_user   = local.registry_login_user
  })
}
