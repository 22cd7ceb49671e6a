# Provider-free on purpose: `terraform test` runs this module offline with no download.
# 1.9 is the first Terraform whose validation blocks may read other variables.
terraform {
  required_version = ">= 1.9"
}
