provider "google" {
  project = var.project_id
  region  = var.region
  zone    = var.zone

  # Catches anything labelable that a resource below does not label explicitly.
  default_labels = local.labels
}

# Only the TPU VM (tpu.tf) uses google-beta; same project, place and default labels as google.
provider "google-beta" {
  project        = var.project_id
  region         = var.region
  zone           = var.zone
  default_labels = local.labels
}
