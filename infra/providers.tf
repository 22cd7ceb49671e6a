# Every call is billed to, and checked against, the deployment's project (X-Goog-User-Project): with user
# credentials (gcloud auth application-default login) and no quota project, Service Usage and Resource Manager
# otherwise answer 403 (terraform-provider-google #7351, #1538). user_project_override sends the project for the
# resources that support it, billing_project for the rest (the provider reference's "user_project_override").
# Service Usage and Resource Manager must then be on in the project before the first apply (README, `make preflight`).
provider "google" {
  project               = var.project_id
  region                = var.region
  zone                  = var.zone
  user_project_override = true
  billing_project       = var.project_id

  # Catches anything labelable that a resource below does not label explicitly.
  default_labels = local.labels
}

# Only the TPU VM (tpu.tf) uses google-beta; same project, place, billing and default labels as google.
provider "google-beta" {
  project               = var.project_id
  region                = var.region
  zone                  = var.zone
  user_project_override = true
  billing_project       = var.project_id
  default_labels        = local.labels
}
