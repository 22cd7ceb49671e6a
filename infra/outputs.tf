# What the launcher (packages/gantry) reads with `terraform output -json`.

output "bucket" {
  description = "Name of the runs bucket (checkpoints and stats under gs://BUCKET/runs/RUN_ID)."
  value       = google_storage_bucket.runs.name
}

output "guest_attribute_namespace" {
  description = "Guest-attribute namespace nodes report to (boot: starting | ready | error: ...; the agent adds run state)."
  value       = module.startup_script.guest_attribute_namespace
}

output "image_repository_url" {
  description = "Artifact Registry Docker repository for the trainer image: REGION-docker.pkg.dev/PROJECT/REPO."
  value       = local.image_repository_url
}

output "master_address" {
  description = "Internal IP of node 0, the torchrun rendezvous (c10d) host (the TPU VM's worker 0 when use_tpu)."
  value       = var.use_tpu ? google_tpu_v2_vm.node[0].network_endpoints[0].ip_address : google_compute_instance.node[0].network_interface[0].network_ip
}

output "node_addresses" {
  description = "Internal IP of every node in node order (GANTRY_NODE_IPS); node 0's is master_address."
  value       = var.use_tpu ? google_tpu_v2_vm.node[*].network_endpoints[0].ip_address : google_compute_instance.node[*].network_interface[0].network_ip
}

output "node_names" {
  description = "Instance names in node order; node 0 is the master (the TPU VM's name when use_tpu)."
  value       = var.use_tpu ? google_tpu_v2_vm.node[*].name : google_compute_instance.node[*].name
}

output "node_zones" {
  description = "Zone of each node, in node order."
  value       = var.use_tpu ? google_tpu_v2_vm.node[*].zone : google_compute_instance.node[*].zone
}

output "project_id" {
  description = "Project of the deployment."
  value       = var.project_id
}

output "run_metadata_key" {
  description = "Instance metadata key the launcher writes the run spec into; Terraform ignores changes to it."
  value       = module.startup_script.run_metadata_key
}

output "use_gpu" {
  description = "Whether nodes are N1 + GPU (true) or C4 CPU (false)."
  value       = var.use_gpu
}

output "use_tpu" {
  description = "Whether the node is a Cloud TPU VM (true; the launcher runs the TPU image there) or C4/N1 (false)."
  value       = var.use_tpu
}

output "zone" {
  description = "Zone of the nodes."
  value       = var.zone
}
