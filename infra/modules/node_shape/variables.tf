# The inputs are the root module's variables of the same names, which it passes one for one
# (../../main.tf). What each means, its default and its rules live once, in ../../variables.tf:
# Terraform has no variable inheritance, so the names and types must be declared here again, and
# the validation blocks belong at the root because that is where the user sets the values (a
# bad value fails on the tfvars line that set it, and gantry's offline check of variables.tf,
# gantry.terraform.check_variables, evaluates them) and because a root tftest cannot expect a
# child module's input validation to fail (expect_failures refuses module.node_shape).
# No defaults: the root passes every input.

#### shape ####

variable "use_gpu" {
  description = "infra/variables.tf: var.use_gpu"
  type        = bool
}

variable "node_count" {
  description = "infra/variables.tf: var.node_count"
  type        = number
}

variable "cpu_machine_type" {
  description = "infra/variables.tf: var.cpu_machine_type"
  type        = string
}

variable "gpu_machine_type" {
  description = "infra/variables.tf: var.gpu_machine_type"
  type        = string
}

variable "allow_non_c4_cpu_shape" {
  description = "infra/variables.tf: var.allow_non_c4_cpu_shape"
  type        = bool
}

variable "accelerator_type" {
  description = "infra/variables.tf: var.accelerator_type"
  type        = string
}

variable "accelerator_count" {
  description = "infra/variables.tf: var.accelerator_count"
  type        = number
}

#### disk and image ####

variable "boot_disk_size_gb" {
  description = "infra/variables.tf: var.boot_disk_size_gb"
  type        = number
}

variable "cpu_image" {
  description = "infra/variables.tf: var.cpu_image"
  type        = string
}

variable "gpu_image_project" {
  description = "infra/variables.tf: var.gpu_image_project"
  type        = string
}

variable "gpu_image_family" {
  description = "infra/variables.tf: var.gpu_image_family"
  type        = string
}

#### scheduling ####

variable "spot" {
  description = "infra/variables.tf: var.spot"
  type        = bool
}

variable "max_run_hours" {
  description = "infra/variables.tf: var.max_run_hours"
  type        = number
}

variable "termination_action" {
  description = "infra/variables.tf: var.termination_action"
  type        = string
}
