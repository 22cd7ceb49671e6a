# hashicorp/google ~> 8.7: GA scheduling.max_run_duration needs >= 7.45, and 8.7.0 is the
# schema the offline stand-in provider serves (docs/INFRA.md). Terraform >= 1.9 lets a variable's
# validation read other variables (use_gpu x machine type checks).
terraform {
  required_version = ">= 1.9"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 8.7"
    }
    # google_tpu_v2_vm (use_tpu) exists only in google-beta 8.7.0, not in the GA provider.
    google-beta = {
      source  = "hashicorp/google-beta"
      version = "~> 8.7"
    }
  }
}
