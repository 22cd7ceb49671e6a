# Provider-free: renders the node startup script, so tests/infra can render it offline and
# run shellcheck on exactly what a VM receives.
terraform {
  required_version = ">= 1.9"
}
