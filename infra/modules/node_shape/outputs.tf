output "accelerator" {
  description = "Human-readable GPU description for cost estimates: \"1x nvidia-tesla-t4\" or \"none\"."
  value       = local.accelerator
}

output "boot_disk_size_gb" {
  description = "Boot disk size in GB."
  value       = var.boot_disk_size_gb
}

output "boot_disk_type" {
  description = "hyperdisk-balanced for C4 and other hyperdisk-only families, pd-balanced otherwise."
  value       = local.boot_disk_type
}

output "compact_placement" {
  description = "Whether the nodes get a compact (COLLOCATED) placement policy: node_count > 1 on a machine series that supports it (C4 yes, N1 no)."
  value       = local.compact_placement
}

output "enable_secure_boot" {
  description = "Shielded VM Secure Boot: on for the CPU path, off for GPU images whose driver may be unsigned."
  value       = local.enable_secure_boot
}

output "guest_accelerators" {
  description = "List of {type, count} for a dynamic guest_accelerator block; empty on the CPU path."
  value       = local.guest_accelerators
}

output "image" {
  description = "Boot image family as projects/PROJECT/global/images/family/FAMILY: a change of it replaces the nodes."
  value       = local.image
}

output "image_family" {
  description = "Boot image family; the root module resolves it with a google_compute_image data source."
  value       = local.image_family
}

output "image_project" {
  description = "Project that publishes the boot image."
  value       = local.image_project
}

output "machine_family" {
  description = "Machine family prefix of machine_type, e.g. c4 or n1."
  value       = local.machine_family
}

output "machine_type" {
  description = "The machine type every node gets."
  value       = local.machine_type
}

output "nic_type" {
  description = "GVNIC on both paths (C4 requires it; on N1 it is faster than virtio-net)."
  value       = local.nic_type
}

output "node_indexes" {
  description = "0 .. node_count-1; index 0 is the master."
  value       = local.node_indexes
}

output "scheduling" {
  description = "Scheduling decisions: provisioning_model, preemptible, automatic_restart, on_host_maintenance, instance_termination_action (null unless Spot or max_run_hours), max_run_duration_seconds (null when max_run_hours = 0)."
  value       = local.scheduling
}

output "spot" {
  description = "Whether nodes are Spot VMs."
  value       = var.spot
}

output "use_gpu" {
  description = "Whether nodes carry GPUs."
  value       = var.use_gpu
}
