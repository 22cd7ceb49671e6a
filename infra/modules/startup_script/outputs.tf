output "agent_metadata_key" {
  description = "Instance metadata key whose value is the agent's Python source."
  value       = local.agent_metadata_key
}

output "contract_metadata_key" {
  description = "Instance metadata key whose value is the launch contract's Python source (the agent imports it)."
  value       = local.contract_metadata_key
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
