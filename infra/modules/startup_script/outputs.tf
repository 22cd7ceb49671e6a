output "agent_log_path" {
  description = "File the agent appends its log to (it also logs to journald as gantry-agent)."
  value       = local.agent_log_path
}

output "agent_metadata_key" {
  description = "Instance metadata key whose value is the agent's Python source."
  value       = local.agent_metadata_key
}

output "contract_metadata_key" {
  description = "Instance metadata key whose value is the launch contract's Python source (the agent imports it)."
  value       = local.contract_metadata_key
}

output "agent_path" {
  description = "Where the startup script installs the agent on the VM."
  value       = local.agent_path
}

output "agent_unit" {
  description = "systemd unit that runs the agent."
  value       = local.agent_unit
}

output "guest_attribute_namespace" {
  description = "Guest-attribute namespace the node reports to (boot state from the startup script, run state from the agent)."
  value       = local.guest_attribute_ns
}

output "run_metadata_key" {
  description = "Instance metadata key the launcher writes the run spec into (Terraform ignores its changes)."
  value       = local.run_metadata_key
}

output "script" {
  description = "The rendered startup script (metadata key startup-script)."
  value       = local.script
}
