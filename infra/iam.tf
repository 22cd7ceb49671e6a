# The nodes' identity, with only what a node does: pull the trainer image, read and write run
# data in this deployment's bucket, write logs, and (use_tpu) stop its own TPU node.

resource "google_service_account" "node" {
  account_id   = "${var.deployment_name}-node"
  display_name = "Gantry nodes of deployment ${var.deployment_name}"

  depends_on = [google_project_service.required]
}

resource "google_artifact_registry_repository_iam_member" "node_reader" {
  project    = google_artifact_registry_repository.images.project
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.node.email}"
}

resource "google_storage_bucket_iam_member" "node_object_admin" {
  bucket = google_storage_bucket.runs.name
  role   = "roles/storage.objectAdmin"
  member = "serviceAccount:${google_service_account.node.email}"
}

# Log writing has no narrower scope than the project.
resource "google_project_iam_member" "node_log_writer" {
  project = var.project_id
  role    = "roles/logging.logWriter"
  member  = "serviceAccount:${google_service_account.node.email}"
}

# use_tpu: the node stops its own TPU node (nodes:stop) after idle_shutdown_minutes, a crash loop or
# max_run_hours, since powering a TPU VM's host off does not stop Cloud TPU's billing and
# google_tpu_v2_vm has no run-duration limit (packages/gantry_agent/power.py, stop_tpu_node). No
# predefined role is narrower than roles/tpu.admin, which could also create TPUs, so a custom role
# holds exactly what that call needs. Project-wide: Cloud TPU nodes have no IAM policy of their own,
# and an IAM Condition on resource.name works only for the services listed in
# cloud.google.com/iam/docs/conditions-resource-attributes ("Other services and resource types do
# not recognize resource attributes"); Cloud TPU could not be confirmed there, and a condition it
# does not recognize would deny the very call this grant is for.
resource "google_project_iam_custom_role" "tpu_self_stop" {
  count = local.tpu_node_count

  project = var.project_id
  # A deleted custom role keeps its ID for up to 37 days (`make destroy`, then `make apply` within
  # that window would fail on the same ID), so the ID ends in a suffix drawn once per deployment.
  role_id     = "${replace(var.deployment_name, "-", "_")}_tpu_self_stop_${substr(replace(terraform_data.tpu_role_suffix[0].id, "-", ""), 0, 8)}"
  title       = "Gantry ${var.deployment_name}: TPU node stops itself"
  description = "Lets the nodes of Gantry deployment ${var.deployment_name} stop their TPU node when idle, crash-looping or past max_run_hours."
  permissions = ["tpu.nodes.get", "tpu.nodes.stop"]

  depends_on = [google_project_service.required]
}

# A random UUID Terraform draws at create and keeps in state: the custom role's ID suffix.
resource "terraform_data" "tpu_role_suffix" {
  count = local.tpu_node_count
}

resource "google_project_iam_member" "node_tpu_self_stop" {
  count = local.tpu_node_count

  project = var.project_id
  role    = google_project_iam_custom_role.tpu_self_stop[0].id
  member  = "serviceAccount:${google_service_account.node.email}"
}
