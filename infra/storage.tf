# Where images and run data live: a Docker repository for the trainer image and a private
# bucket for checkpoints and stats (gs://BUCKET/runs/RUN_ID).

resource "google_artifact_registry_repository" "images" {
  #checkov:skip=CKV_GCP_84: Google-managed encryption; a customer-managed KMS key would outlive `make destroy` (keys cannot be deleted at once) and the images hold no secrets
  location      = var.region
  repository_id = var.deployment_name
  format        = "DOCKER"
  description   = "Trainer images of Gantry deployment ${var.deployment_name}"
  labels        = local.labels

  # Every `make build-train` moves :cpu/:cuda to a new multi-GB version; the old ones would bill
  # forever. Keep the newest few (a node resuming a run pulls its pinned digest again), delete the
  # rest once untagged for a week. A version both policies match is kept.
  cleanup_policy_dry_run = false
  cleanup_policies {
    id     = "keep-newest-3"
    action = "KEEP"
    most_recent_versions {
      keep_count = 3
    }
  }
  cleanup_policies {
    id     = "delete-untagged-after-7-days"
    action = "DELETE"
    condition {
      tag_state  = "UNTAGGED"
      older_than = "604800s"
    }
  }

  depends_on = [google_project_service.required]
}

resource "google_storage_bucket" "runs" {
  #checkov:skip=CKV_GCP_62: access logs would need a second bucket that outlives this one; the bucket is private (uniform access, public access prevention) and only the node service account writes to it
  #checkov:skip=CKV_GCP_78: checkpoints are write-once step-N objects and stats are re-uploaded often; versioning would multiply storage cost without protecting anything the step-N history does not
  name                        = local.bucket_name
  location                    = upper(var.region)
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = var.bucket_force_destroy
  labels                      = local.labels

  # Soft delete (default: 7 days) would keep billing every checkpoint the trainer rotates out and
  # everything `make destroy --delete-data` removes; 0 turns it off. Checkpoints are step-N objects
  # the trainer writes again, not the only copy of anything.
  soft_delete_policy {
    retention_duration_seconds = 0
  }

  depends_on = [google_project_service.required]
}
