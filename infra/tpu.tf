# use_tpu: one Cloud TPU VM in place of the C4/N1 nodes of main.tf, on the same private subnet,
# with the same service account, labels, network tag and boot contract (local.node_metadata:
# startup script and node agent), so the launcher's verbs reach it the same way.
# google_tpu_v2_vm is beta-only in hashicorp/google 8.7.0, hence `provider = google-beta`.

resource "google_tpu_v2_vm" "node" {
  provider = google-beta
  count    = local.tpu_node_count

  name             = "${var.deployment_name}-node-0"
  zone             = var.zone
  accelerator_type = var.tpu_type
  runtime_version  = local.tpu_runtime_version
  description      = "Gantry TPU node of deployment ${var.deployment_name}"
  tags             = [local.node_tag]
  labels = merge(local.labels, {
    gantry-role = "master"
  })

  # No external IP: egress through Cloud NAT, SSH through IAP, as for the VMs.
  network_config {
    network             = google_compute_network.vpc.id
    subnetwork          = google_compute_subnetwork.nodes.id
    enable_external_ips = false
    can_ip_forward      = false
  }

  service_account {
    email = google_service_account.node.email
    # Access is bounded by the service account's IAM roles (iam.tf), not by scopes.
    scope = ["https://www.googleapis.com/auth/cloud-platform"]
  }

  # Spot TPUs cost a fraction of on-demand and can be preempted at any time.
  dynamic "scheduling_config" {
    for_each = var.spot ? [true] : []
    content {
      spot = true
    }
  }

  metadata = local.node_metadata

  lifecycle {
    # The launcher writes the run spec into gantry-run; runs must never show up as drift.
    ignore_changes = [metadata["gantry-run"]]
  }

  # The first boot pulls packages through NAT and the image with the service account's roles.
  depends_on = [
    google_project_service.required,
    google_compute_router_nat.nodes,
    google_artifact_registry_repository_iam_member.node_reader,
    google_storage_bucket_iam_member.node_object_admin,
    google_project_iam_member.node_log_writer,
    # The agent stops the node itself (idle, crash loop, max_run_hours): the grant must exist first.
    google_project_iam_member.node_tpu_self_stop,
  ]
}
