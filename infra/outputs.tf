# What the launcher (packages/gantry) reads with `terraform output -json`.

output "accelerator" {
  description = "GPUs per node for cost estimates: {type, count}; {type = \"none\", count = 0} on the CPU path."
  value = {
    type  = var.use_gpu ? var.accelerator_type : "none"
    count = var.use_gpu ? var.accelerator_count : 0
  }
}

output "agent_metadata_key" {
  description = "Instance metadata key that carries the node agent's source."
  value       = module.startup_script.agent_metadata_key
}

output "boot_image" {
  description = "Boot image family every node was created from (projects/P/global/images/family/F); preflight checks it still exists."
  value       = module.node_shape.image
}

output "bucket" {
  description = "Name of the runs bucket (checkpoints and stats under gs://BUCKET/runs/RUN_ID)."
  value       = google_storage_bucket.runs.name
}

output "deployment_label" {
  description = "The label on every labelable resource of this deployment, as {key = value}."
  value       = local.labels
}

output "guest_attribute_namespace" {
  description = "Guest-attribute namespace nodes report to (boot: starting | ready | error: ...; the agent adds run state)."
  value       = module.startup_script.guest_attribute_namespace
}

output "image_repository_url" {
  description = "Artifact Registry Docker repository for the trainer image: REGION-docker.pkg.dev/PROJECT/REPO."
  value       = local.image_repository_url
}

output "internal_ips" {
  description = "Internal IPv4 address of each node, in node order."
  value       = google_compute_instance.node[*].network_interface[0].network_ip
}

output "machine_type" {
  description = "Machine type of every node."
  value       = module.node_shape.machine_type
}

output "master_address" {
  description = "Internal IP of node 0, the torchrun rendezvous (c10d) host."
  value       = google_compute_instance.node[0].network_interface[0].network_ip
}

output "max_run_hours" {
  description = "GCE-enforced run limit per node in hours (0 = none)."
  value       = var.max_run_hours
}

output "node_count" {
  description = "Number of nodes."
  value       = var.node_count
}

output "node_names" {
  description = "Instance names in node order; node 0 is the master."
  value       = google_compute_instance.node[*].name
}

output "node_service_account" {
  description = "Email of the nodes' service account."
  value       = google_service_account.node.email
}

output "node_zones" {
  description = "Zone of each node, in node order."
  value       = google_compute_instance.node[*].zone
}

output "project_id" {
  description = "Project of the deployment."
  value       = var.project_id
}

output "region" {
  description = "Region of the deployment."
  value       = var.region
}

output "registry_host" {
  description = "Artifact Registry host to authenticate Docker against."
  value       = local.registry_host
}

output "run_metadata_key" {
  description = "Instance metadata key the launcher writes the run spec into; Terraform ignores changes to it."
  value       = module.startup_script.run_metadata_key
}

output "spot" {
  description = "Whether nodes are Spot VMs."
  value       = var.spot
}

output "use_gpu" {
  description = "Whether nodes are N1 + GPU (true) or C4 CPU (false)."
  value       = var.use_gpu
}

output "zone" {
  description = "Zone of the nodes."
  value       = var.zone
}
