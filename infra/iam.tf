# The nodes' identity, with only what a node does: pull the trainer image, read and write run
# data in this deployment's bucket, and write logs.

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
