# The inputs are the root module's variables of the same names; the validations here are
# mirrored in ../../variables.tf (tests/infra checks that the messages stay identical).

#### shape ####

variable "use_gpu" {
  description = "false: C4 CPU node (cpu_machine_type). true: N1 node (gpu_machine_type) with accelerator_count x accelerator_type."
  type        = bool
  default     = false
}

variable "node_count" {
  description = "Number of nodes. Node 0 is the torchrun master; nodes 1.. are workers."
  type        = number
  default     = 1

  validation {
    condition     = var.node_count >= 1 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number >= 1 (1 = a single node, N = master + N-1 workers)."
  }
}

variable "cpu_machine_type" {
  description = "Machine type of the CPU path (use_gpu = false). A C4 shape: c4-{standard,highcpu,highmem}-{2,4,8,16,24,32,48,96,144,192,288}, or c4-{standard,highmem}-N-lssd with N >= 4 (there is no c4-highcpu-*-lssd)."
  type        = string
  default     = "c4-highcpu-16"

  validation {
    condition     = var.use_gpu || var.allow_non_c4_cpu_shape || can(regex("^c4-((standard|highcpu|highmem)-(2|4|8|16|24|32|48|96|144|192|288)|(standard|highmem)-(4|8|16|24|32|48|96|144|192|288)-lssd)$", var.cpu_machine_type))
    error_message = "cpu_machine_type must be a C4 shape on the CPU path: c4-{standard,highcpu,highmem}-N with N in 2,4,8,16,24,32,48,96,144,192,288, or c4-{standard,highmem}-N-lssd with N >= 4 (e.g. c4-highcpu-16; c4-highcpu-16-lssd does not exist, and c4-highcpu-22 does not exist; an n1-* type is the GPU path's shape: set use_gpu = true). To run another family on purpose, set allow_non_c4_cpu_shape = true."
  }

  validation {
    condition     = can(regex("^[a-z][a-z0-9]*-[a-z0-9-]+$", var.cpu_machine_type))
    error_message = "cpu_machine_type must look like FAMILY-TYPE-N (e.g. c4-highcpu-16)."
  }
}

variable "gpu_machine_type" {
  description = "Machine type of the GPU path (use_gpu = true). T4, P4, P100 and V100 attach only to N1 shapes."
  type        = string
  default     = "n1-standard-8"

  validation {
    condition     = !var.use_gpu || can(regex("^n1-(standard|highmem|highcpu)-(1|2|4|8|16|32|64|96)$", var.gpu_machine_type))
    error_message = "gpu_machine_type must be an N1 shape when use_gpu = true (e.g. n1-standard-8): a T4 attaches only to N1; C4 and other families take no T4. For a CPU node set use_gpu = false and use cpu_machine_type."
  }
}

variable "allow_non_c4_cpu_shape" {
  description = "Deliberate override: let cpu_machine_type be a non-C4 shape (e.g. n2-standard-16 where C4 is out of stock or out of quota)."
  type        = bool
  default     = false
}

variable "accelerator_type" {
  description = "GPU type on the GPU path: a GPU that attaches to N1 with compute capability >= docker/torch.json's min_compute_capability (7.5: the CUDA 13 torch has no kernels for P4, P100 or V100), i.e. nvidia-tesla-t4."
  type        = string
  default     = "nvidia-tesla-t4"

  validation {
    condition     = contains(["nvidia-tesla-t4"], var.accelerator_type)
    error_message = "accelerator_type must be nvidia-tesla-t4: the only GPU that attaches to N1 and that the CUDA image's torch (CUDA 13, docker/torch.json) has kernels for (compute capability 7.5+; P4, P100 and V100 are 6.x-7.0)."
  }
}

variable "accelerator_count" {
  description = "GPUs per node on the GPU path: 1, 2 or 4 (what N1 takes of nvidia-tesla-t4)."
  type        = number
  default     = 1

  validation {
    condition     = contains([1, 2, 4], var.accelerator_count)
    error_message = "accelerator_count must be 1, 2 or 4 (nvidia-tesla-t4 on N1)."
  }
}

#### disk and image ####

variable "boot_disk_size_gb" {
  description = "Boot disk size in GB. Deep Learning VM images need at least 50; the trainer image and checkpoints live here too."
  type        = number
  default     = 100

  validation {
    condition     = var.boot_disk_size_gb >= 50 && var.boot_disk_size_gb <= 65536
    error_message = "boot_disk_size_gb must be between 50 and 65536 (Deep Learning VM images need 50 GB; Docker images and checkpoints need room)."
  }
}

variable "cpu_image" {
  description = "Boot image family of the CPU path as PROJECT/FAMILY (plan resolves it to the family's newest image); must support gVNIC (C4 requires it)."
  type        = string
  default     = "ubuntu-os-cloud/ubuntu-2404-lts-amd64"

  validation {
    condition     = can(regex("^[a-z][-a-z0-9.:]*/[a-z][-a-z0-9]*$", var.cpu_image))
    error_message = "cpu_image must be PROJECT/FAMILY, e.g. ubuntu-os-cloud/ubuntu-2404-lts-amd64."
  }
}

variable "gpu_image_project" {
  description = "Project that publishes the GPU path's boot image family (Deep Learning VM images)."
  type        = string
  default     = "deeplearning-platform-release"
}

variable "gpu_image_family" {
  description = "Deep Learning VM image family of the GPU path: NVIDIA driver baked in, its CUDA at least required_cuda_version. Families get retired (plan then fails naming the family): `gcloud compute images list --project deeplearning-platform-release --no-standard-images --filter='family~common-cu'` lists the live ones."
  type        = string
  # CUDA 12.9 toolkit, NVIDIA driver 580 (runs CUDA up to 13.0), Ubuntu 22.04 with gVNIC support.
  # The default before it, common-cu128-ubuntu-2204-nvidia-570, reached end of support in April 2026
  # (Google's Deep Learning VM image table, cloud.google.com/deep-learning-vm/docs/images).
  default = "common-cu129-ubuntu-2204-nvidia-580"

  validation {
    condition     = can(regex("^[a-z][-a-z0-9]*$", var.gpu_image_family))
    error_message = "gpu_image_family must be an image family name such as common-cu129-ubuntu-2204-nvidia-580."
  }
}

#### scheduling ####

variable "spot" {
  description = "Run nodes as Spot VMs (about 40-60% cheaper; GCE may preempt them with ~30 s notice). Needs max_run_hours > 0."
  type        = bool
  default     = false

  # A preempted node stays TERMINATED while the others wait at the torchrun rendezvous and
  # bill; only a GCE-enforced run limit is sure to stop them all.
  validation {
    condition     = !var.spot || var.max_run_hours > 0
    error_message = "spot = true needs max_run_hours > 0 (e.g. max_run_hours = 8): a preempted Spot node stays TERMINATED while the other nodes wait for it and bill; max_run_hours makes GCE stop every node after that long."
  }
}

variable "max_run_hours" {
  description = "Limit on how long each node runs: GCE enforces it on a VM (max_run_duration; stopped or deleted by termination_action) even if the laptop and the Terraform state are lost; on a TPU VM the node agent stops the trainer with a checkpoint, then the TPU node (nodes:stop). Default 6: above the trainer's default budget of a gantry run (4 h), so a forgotten deployment stops billing for its VMs by itself. 0 = no limit."
  type        = number
  default     = 6

  validation {
    condition     = var.max_run_hours == 0 || (var.max_run_hours >= 0.1 && var.max_run_hours <= 2880)
    error_message = "max_run_hours must be 0 (no limit) or between 0.1 and 2880 (GCE allows up to 120 days)."
  }
}

variable "termination_action" {
  description = "What GCE does at a Spot preemption or when max_run_hours runs out: STOP (disk kept, node can be started again and resume) or DELETE (nothing left billing, Terraform recreates it on the next apply)."
  type        = string
  default     = "STOP"

  validation {
    condition     = contains(["STOP", "DELETE"], var.termination_action)
    error_message = "termination_action must be STOP or DELETE."
  }
}
