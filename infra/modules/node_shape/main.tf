# Every decision about what a Gantry node is: shape, disk, NIC, image, GPUs and scheduling.
# Pure expressions over the variables, no provider: the root module only wires these into
# google_compute_instance, and tests/*.tftest.hcl check every use_gpu x spot combination offline.

locals {
  # The GPUs a node may carry and the machine types that carry each count (infra/gpu_shapes.json, which gantry
  # reads too): N1 takes T4s on any shape the root's rules allow (n1-standard-8 unless gpu_machine_type names one);
  # G2, A2 and A3 carry their L4s, A100s and H100s in the machine type, the first listed unless one is named.
  gpu              = jsondecode(file("${path.module}/../../gpu_shapes.json")).gpus[var.accelerator_type]
  gpu_family       = local.gpu.family
  gpu_machine_type = var.gpu_machine_type != "" ? var.gpu_machine_type : local.gpu.machine_types[tostring(var.accelerator_count)][0]
  machine_type     = var.use_gpu ? local.gpu_machine_type : var.cpu_machine_type
  machine_family   = split("-", local.machine_type)[0]

  # Hyperdisk-only families refuse pd-*; older families (N1, N2, E2) have no hyperdisk-balanced.
  hyperdisk_families = ["c4", "c4d", "c3", "c3d", "n4", "h3", "m3", "m4", "x4", "z3"]
  boot_disk_type     = contains(local.hyperdisk_families, local.machine_family) ? "hyperdisk-balanced" : "pd-balanced"

  # gVNIC on both paths: C4 requires it, and on N1 it carries more bandwidth than virtio-net for
  # the nodes' gloo/nccl traffic. Both default images list GVNIC among their guest OS features
  # (Ubuntu 24.04 LTS; Deep Learning VM families on Ubuntu 22.04 ship the gve driver).
  nic_type = "GVNIC"

  # A compact placement policy (COLLOCATED) puts a multi-node run's VMs on nearby hosts: lower
  # latency for the torchrun rendezvous and gradient all-reduce. GCE offers it only on some machine
  # series (C4 among them; not N1, so the GPU path goes without) and only to VMs that do not
  # live-migrate (on_host_maintenance = TERMINATE, below).
  compact_placement_families = ["a2", "a3", "c2", "c2d", "c3", "c3d", "c4", "c4d", "g2", "h3", "n2", "n2d"]
  compact_placement          = var.node_count > 1 && contains(local.compact_placement_families, local.machine_family)

  image_project = var.use_gpu ? var.gpu_image_project : split("/", var.cpu_image)[0]
  image_family  = var.use_gpu ? var.gpu_image_family : split("/", var.cpu_image)[1]
  # The root module resolves the family at plan time (data "google_compute_image"), so a retired
  # family fails plan; this path names the family, whose change must replace the nodes.
  image = "projects/${local.image_project}/global/images/family/${local.image_family}"

  # A dynamic guest_accelerator block iterates this: empty on the CPU path, so no block with count = 0 is ever
  # sent, and empty for G2, A2 and A3, whose machine type carries the GPUs ("For these machine types, the GPU model
  # is automatically attached", cloud.google.com/compute/docs/gpus): a block there would have to repeat the type's
  # count exactly, and Google's Cluster Toolkit leaves it unset (null) to avoid a permanent diff.
  guest_accelerators = var.use_gpu && local.gpu_family == "n1" ? [{ type = var.accelerator_type, count = var.accelerator_count }] : []
  accelerator        = var.use_gpu ? "${var.accelerator_count}x ${var.accelerator_type}" : "none"

  # GPUs cannot live-migrate, Spot VMs cannot either, and compact placement takes only VMs that do
  # not: all three need TERMINATE. A Spot VM must not restart automatically (GCE refuses it); a
  # standard one comes back after a host event (the trainer resumes from its newest checkpoint).
  on_host_maintenance = var.use_gpu || var.spot || local.compact_placement ? "TERMINATE" : "MIGRATE"
  max_run_seconds     = var.max_run_hours > 0 ? floor(var.max_run_hours * 3600) : null
  # GCE accepts a termination action only for Spot VMs or with a max run duration.
  termination_action = var.spot || var.max_run_hours > 0 ? var.termination_action : null

  scheduling = {
    provisioning_model          = var.spot ? "SPOT" : "STANDARD"
    preemptible                 = var.spot
    automatic_restart           = !var.spot
    on_host_maintenance         = local.on_host_maintenance
    instance_termination_action = local.termination_action
    max_run_duration_seconds    = local.max_run_seconds
  }

  # NVIDIA's kernel modules on Deep Learning VM images are not always signed for Secure Boot;
  # vTPM and integrity monitoring stay on for both paths.
  enable_secure_boot = !var.use_gpu

  node_indexes = range(var.node_count)
}
