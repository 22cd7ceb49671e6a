# Inputs of the Gantry deployment. The launcher reads these names from infra/terraform.tfvars
# (gantry.config: their values, defaults included, come from Terraform, not from a copy).
# Each setting's description, default and validation rules live here and nowhere else:
# modules/node_shape declares the shape/scheduling inputs again with their types only
# (its variables.tf says why those must stay twice).

#### project and placement ####

variable "project_id" {
  description = "GCP project to deploy into."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a GCP project ID (6-30 lowercase letters, digits and hyphens), e.g. my-gcp-project; `gcloud projects list` shows yours."
  }
}

variable "region" {
  description = "Region of the subnet, Cloud NAT, Artifact Registry repository and bucket."
  type        = string
  default     = "us-central1"

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "region must be a GCP region such as us-central1."
  }
}

variable "zone" {
  description = "Zone of the nodes, inside region. On the GPU path it must offer accelerator_type (infra/gpu_shapes.json lists the zones: T4 and A100 in us-central1-a, -b, -c and -f, L4 and H100 in -a, -b and -c, A100 80 GB in -a and -c); `make preflight` lists zones with the shape."
  type        = string
  default     = "us-central1-a"

  validation {
    condition     = startswith(var.zone, "${var.region}-") && can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", var.zone))
    error_message = "zone must be a zone of region (e.g. us-central1-a for region us-central1)."
  }

  # Zones per GPU and count come from gpu_shapes.json (SkyPilot's catalog of Google's offerings, cited there): a count's
  # machine types share their zones, so the rule reads no gpu_machine_type (a bad one would silence it).
  validation {
    condition     = !var.use_gpu || contains(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, [var.zone]), var.zone)
    error_message = "${var.accelerator_count} x ${var.accelerator_type} is not offered in zone ${var.zone}: ${length([for z in try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, [var.zone]) : z if startswith(z, "${var.region}-")]) > 0 ? "in region ${var.region} use zone ${join(" or ", [for z in try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, [var.zone]) : z if startswith(z, "${var.region}-")])}" : "region ${var.region} has none; set region and zone to one of ${join(", ", distinct([for z in try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, [var.zone]) : regex("^(.*)-[a-z]$", z)[0]]))}"} (infra/gpu_shapes.json)."
  }
}

variable "fallback_zones" {
  description = "Zones of region that `make apply` moves the nodes to, in this order, when zone has no capacity for the shape (a stock-out) and no node exists yet; once nodes exist in one of them, later `make apply`s keep them there until `make destroy`. Read by the launcher only: Terraform places the nodes in zone, which gantry then passes as -var zone=... . Empty: a stock-out stops apply and names the zones that offer the shape."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for z in var.fallback_zones : startswith(z, "${var.region}-") && can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", z))])
    error_message = "fallback_zones must list zones of region (e.g. [\"us-central1-b\", \"us-central1-c\"] for region us-central1); `make preflight` lists the zones that offer the shape."
  }

  validation {
    # Not "and not zone itself": gantry applies a fallback zone as -var zone=..., which must still pass.
    condition     = length(distinct(var.fallback_zones)) == length(var.fallback_zones)
    error_message = "fallback_zones must name each zone once."
  }

  validation {
    # gantry applies a fallback zone as -var zone=..., where zone's own rule would refuse it after the stock-out
    condition     = !var.use_gpu || alltrue([for z in var.fallback_zones : contains(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, var.fallback_zones), z)])
    error_message = "fallback_zones ${join(", ", [for z in var.fallback_zones : z if !contains(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, var.fallback_zones), z)])} do not offer ${var.accelerator_count} x ${var.accelerator_type}: zones of region ${var.region} that do are ${join(", ", [for z in try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones_of[try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")], jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].zones, var.fallback_zones) : z if startswith(z, "${var.region}-")])} (infra/gpu_shapes.json)."
  }
}

variable "deployment_name" {
  description = "Prefix of every resource name and value of the gantry-deployment label on every labelable resource."
  type        = string
  default     = "gantry"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,20}[a-z0-9]$", var.deployment_name))
    error_message = "deployment_name must be 3-22 lowercase letters, digits or hyphens, starting with a letter (it prefixes resource names and the service account ID)."
  }
}

#### network ####

variable "subnet_cidr" {
  description = "Private IPv4 range of the nodes' subnet."
  type        = string
  default     = "10.42.0.0/24"

  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0)) && tonumber(split("/", var.subnet_cidr)[1]) <= 29
    error_message = "subnet_cidr must be an IPv4 CIDR block of /29 or larger, e.g. 10.42.0.0/24."
  }
}

#### node agent and storage ####

variable "idle_shutdown_minutes" {
  description = "The node agent powers a node off (stops a TPU VM's node, nodes:stop) after this many minutes without a run (0 = never). Stopped nodes bill only their disk."
  type        = number
  default     = 60

  validation {
    condition     = var.idle_shutdown_minutes >= 0 && floor(var.idle_shutdown_minutes) == var.idle_shutdown_minutes
    error_message = "idle_shutdown_minutes must be a whole number >= 0 (0 disables idle shutdown)."
  }
}

variable "required_cuda_version" {
  description = "Override of the CUDA the GPU nodes' driver must run (MAJOR.MINOR). null: docker/torch.json's cuda, the CUDA of the trainer's CUDA image (install_torch.sh holds the image to it). GPU nodes fail their boot loudly when the driver runs less."
  type        = string
  default     = null

  validation {
    condition     = var.required_cuda_version == null || can(regex("^[0-9]+\\.[0-9]+$", var.required_cuda_version))
    error_message = "required_cuda_version must look like MAJOR.MINOR, e.g. 13.0, or be null (docker/torch.json's cuda)."
  }
}

variable "bucket_name" {
  description = "Name of the runs bucket. null: PROJECT_ID-DEPLOYMENT_NAME-runs."
  type        = string
  default     = null

  validation {
    condition     = var.bucket_name == null || can(regex("^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$", var.bucket_name))
    error_message = "bucket_name must be 3-63 lowercase letters, digits, hyphens or underscores."
  }
}

variable "bucket_force_destroy" {
  description = "Let `terraform destroy` delete the runs bucket with checkpoints in it. false keeps run data safe: destroy then stops at a non-empty bucket (docs/INFRA.md, Teardown)."
  type        = bool
  default     = false
}

#### shape ####

variable "use_gpu" {
  description = "false: C4 CPU node (cpu_machine_type). true: a GPU node, accelerator_count x accelerator_type on its machine type (gpu_machine_type: N1 for T4s, G2 for L4s, A2 for A100s, A3 for H100s)."
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
  description = "Machine type of the GPU path (use_gpu = true). Empty: the one infra/gpu_shapes.json lists first for accelerator_count x accelerator_type (n1-standard-8 for T4s, g2-standard-8 for one L4, a2-highgpu-Ng for A100s, a3-highgpu-8g for eight H100s). A T4 attaches to any N1 shape of at most 48 vCPUs (96 with 4 T4s); the L4, A100 and H100 come with their G2, A2 and A3 machine types, so a set value must be one that carries that count."
  type        = string
  default     = ""

  validation {
    condition = !var.use_gpu || var.gpu_machine_type == "" || (
      try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].family, "") == "n1"
      ? can(regex("^n1-(standard|highmem|highcpu)-(1|2|4|8|16|32|64|96)$", var.gpu_machine_type)) && try(tonumber(regex("-([0-9]+)$", var.gpu_machine_type)[0]) <= jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].n1_max_vcpus[tostring(var.accelerator_count)], false)
      : contains(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)], []), var.gpu_machine_type)
    )
    error_message = "gpu_machine_type ${var.gpu_machine_type} does not carry ${var.accelerator_count} x ${var.accelerator_type}: ${try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].family, "") == "n1" ? "a T4 attaches only to an N1 shape (n1-standard|highmem|highcpu-N) of at most ${try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].n1_max_vcpus[tostring(var.accelerator_count)], 48)} vCPUs with ${var.accelerator_count} T4s, e.g. n1-standard-8" : "use one of ${join(", ", try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)], []))}"}, or leave it empty (infra/gpu_shapes.json picks). For a CPU node set use_gpu = false and use cpu_machine_type."
  }
}

variable "allow_non_c4_cpu_shape" {
  description = "Deliberate override: let cpu_machine_type be a non-C4 shape (e.g. n2-standard-16 where C4 is out of stock or out of quota)."
  type        = bool
  default     = false
}

variable "accelerator_type" {
  description = "GPU type on the GPU path, one of infra/gpu_shapes.json's: nvidia-tesla-t4 (on N1), nvidia-l4 (G2), nvidia-tesla-a100 or nvidia-a100-80gb (A2), nvidia-h100-80gb (A3). Each has compute capability >= docker/torch.json's min_compute_capability (7.5: the CUDA 13 torch has no kernels for P4, P100 or V100)."
  type        = string
  default     = "nvidia-tesla-t4"

  validation {
    condition     = contains(keys(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus, {})), var.accelerator_type)
    error_message = "accelerator_type must be one of ${join(", ", sort(keys(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus, {}))))} (infra/gpu_shapes.json): the GPUs the CUDA image's torch (CUDA 13, docker/torch.json) has kernels for (compute capability 7.5+; P4, P100 and V100 are 6.x-7.0)."
  }
}

variable "accelerator_count" {
  description = "GPUs per node on the GPU path, a count the type comes in (infra/gpu_shapes.json): T4 1, 2, 4; L4 1, 2, 4, 8; A100 40 GB 1, 2, 4, 8, 16; A100 80 GB 1, 2, 4, 8; H100 8 (1, 2, 4 as Spot only)."
  type        = number
  default     = 1

  validation {
    condition     = !contains(keys(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus, {})), var.accelerator_type) || contains(keys(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types, {})), tostring(var.accelerator_count))
    error_message = "accelerator_count ${var.accelerator_count} of ${var.accelerator_type} is not a shape Google offers: a node takes ${join(", ", [for n in range(1, 17) : n if contains(keys(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types, {})), tostring(n))])} (infra/gpu_shapes.json); for more GPUs raise node_count."
  }

  validation {
    # The count fixes the machine type in a family with spot_only shapes (A3: one per count), so gpu_machine_type,
    # whose own rule reads this variable, is not read here (Terraform refuses a cycle between validations).
    condition     = !var.use_gpu || var.spot || !contains(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].spot_only, []), try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], ""))
    error_message = "${var.accelerator_count} x ${var.accelerator_type} (${try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus[var.accelerator_type].machine_types[tostring(var.accelerator_count)][0], "")}) is offered only as Spot (or Flex-start) VMs, Google's A3 High limitations say: set spot = true, or accelerator_count = 8 for an on-demand a3-highgpu-8g."
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

#### TPU ####

variable "use_tpu" {
  description = "true: one Cloud TPU VM (tpu_type in zone, infra/tpu.tf) instead of the C4/N1 nodes; node_count must be 1 and max_run_hours > 0. Needs TPU quota (or a TRC allocation) in zone. The trainer runs from gantry-trainer:tpu (docker/Dockerfile.tpu, make build-train) with the learner on XLA (run.device=auto: xla)."
  type        = bool
  default     = false

  validation {
    condition     = !(var.use_tpu && var.use_gpu)
    error_message = "use_tpu and use_gpu are mutually exclusive: set use_gpu = false for a TPU VM, or use_tpu = false for an N1 + GPU node."
  }

  # A TPU VM bills hundreds of dollars a day until it is stopped or deleted; refuse to create one with
  # no end. google_tpu_v2_vm (google-beta 8.7.0) has no run-duration setting, so the node agent enforces
  # max_run_hours (GANTRY_MAX_RUN_HOURS): it stops its own TPU node once the host has been up that long.
  validation {
    condition     = !var.use_tpu || var.max_run_hours > 0
    error_message = "use_tpu = true needs max_run_hours > 0 (e.g. max_run_hours = 8): the node agent stops the TPU node after that long, since a forgotten TPU VM bills hundreds of dollars a day; run `make destroy` when done."
  }

  # The single-host types in infra/tpu_zones.json are one VM each; a multi-host slice is a different deployment.
  validation {
    condition     = !var.use_tpu || var.node_count == 1
    error_message = "use_tpu = true needs node_count = 1 (one single-host TPU VM such as v3-8); for more TPU chips choose a larger single-host tpu_type."
  }
}

variable "tpu_type" {
  description = "Cloud TPU VM accelerator type when use_tpu = true: one of the single-host types in infra/tpu_zones.json (v2-8, v3-8, v4-8, v5litepod-1, v5litepod-4, v5litepod-8); zone must offer it."
  type        = string
  default     = "v3-8"

  # Zones per type come from tpu_zones.json (copied, with its source URL, from Google's TPU regions
  # and zones page), read here rather than in locals so that the launcher's offline check of
  # terraform.tfvars (variables.tf plus the JSON beside it, gantry.terraform.check_variables)
  # applies it too. try(): a copy of variables.tf alone still validates the C4/N1 paths.
  validation {
    condition     = !var.use_tpu || contains(keys(try(jsondecode(file("${path.module}/tpu_zones.json")).zones, {})), var.tpu_type)
    error_message = "tpu_type must be one of the single-host TPU VM types in infra/tpu_zones.json (${join(", ", sort(keys(try(jsondecode(file("${path.module}/tpu_zones.json")).zones, {}))))}); add a type there with its zones from Google's TPU regions and zones page."
  }

  validation {
    condition     = !var.use_tpu || contains(lookup(try(jsondecode(file("${path.module}/tpu_zones.json")).zones, {}), var.tpu_type, [var.zone]), var.zone)
    error_message = "tpu_type ${var.tpu_type} is not offered in zone ${var.zone}: set zone (and its region) to one of ${join(", ", lookup(try(jsondecode(file("${path.module}/tpu_zones.json")).zones, {}), var.tpu_type, []))} (infra/tpu_zones.json, from Google's TPU regions and zones page)."
  }
}

variable "tpu_runtime_version" {
  description = "TPU VM software (runtime) version. null: the PyTorch/JAX base image Google recommends for tpu_type, v2-alpha-tpuv5-lite for v5litepod-* and tpu-ubuntu2204-base for v2, v3 and v4 (cloud.google.com/tpu/docs/runtimes)."
  type        = string
  default     = null

  validation {
    condition     = var.tpu_runtime_version == null || can(regex("^[a-z0-9][-a-z0-9.]*$", var.tpu_runtime_version))
    error_message = "tpu_runtime_version must be a TPU software version such as tpu-ubuntu2204-base or v2-alpha-tpuv5-lite (`gcloud compute tpus versions list --zone ZONE` lists them), or null for the default of tpu_type."
  }
}
