provider "google" {
  project = var.project_id
  region  = var.region
  zone    = var.zone

  # Catches anything labelable that a resource below does not label explicitly.
  default_labels = local.labels
}
