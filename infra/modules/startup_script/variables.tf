variable "deployment_name" {
  description = "Deployment name; the value of every resource's gantry-deployment label."
  type        = string
}

variable "idle_shutdown_minutes" {
  description = "The agent powers the VM off after this many minutes with no run (0 = never)."
  type        = number
  default     = 60
}

variable "max_run_hours" {
  description = "The agent stops a Cloud TPU VM's node (nodes:stop) once it has been up this many hours; GCE enforces it on other VMs (0 = no limit)."
  type        = number
  default     = 0

  validation {
    condition     = var.max_run_hours >= 0
    error_message = "max_run_hours must be >= 0 (0 = no limit)."
  }
}

variable "registry_host" {
  description = "Artifact Registry host the node logs in to with its service account token, e.g. us-central1-docker.pkg.dev."
  type        = string
}

variable "required_cuda_version" {
  description = "CUDA version the trainer's CUDA image is built for (the root module passes docker/torch.json's cuda); on GPU nodes the boot fails loudly when the driver supports less."
  type        = string

  validation {
    condition     = can(regex("^[0-9]+\\.[0-9]+$", var.required_cuda_version))
    error_message = "required_cuda_version must look like MAJOR.MINOR, e.g. 13.0."
  }
}

variable "use_gpu" {
  description = "true on N1 + GPU nodes: verify the NVIDIA driver and Container Toolkit at boot."
  type        = bool
}
