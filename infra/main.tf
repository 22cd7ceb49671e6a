# Gantry nodes: node_count VMs of one shape, chosen by use_gpu in modules/node_shape, or with
# use_tpu one TPU VM instead (tpu.tf). Network, identity and storage live in network.tf, iam.tf and storage.tf.

resource "google_project_service" "required" {
  for_each = toset(local.required_apis)

  project = var.project_id
  service = each.value
  # Other workloads in the project may rely on these APIs: destroy leaves them enabled.
  disable_on_destroy = false
}

module "node_shape" {
  source = "./modules/node_shape"

  use_gpu                = var.use_gpu
  node_count             = var.node_count
  cpu_machine_type       = var.cpu_machine_type
  gpu_machine_type       = var.gpu_machine_type
  allow_non_c4_cpu_shape = var.allow_non_c4_cpu_shape
  accelerator_type       = var.accelerator_type
  accelerator_count      = var.accelerator_count
  boot_disk_size_gb      = var.boot_disk_size_gb
  cpu_image              = var.cpu_image
  gpu_image_project      = var.gpu_image_project
  gpu_image_family       = var.gpu_image_family
  spot                   = var.spot
  max_run_hours          = var.max_run_hours
  termination_action     = var.termination_action
}

module "startup_script" {
  source = "./modules/startup_script"

  deployment_name       = var.deployment_name
  use_gpu               = var.use_gpu
  registry_host         = local.registry_host
  idle_shutdown_minutes = var.idle_shutdown_minutes
  max_run_hours         = var.max_run_hours
  required_cuda_version = local.required_cuda_version
}

# The boot image, resolved at plan time: a retired family (Deep Learning VM families reach end of
# support) fails `plan` naming the family, before the network, bucket or repository exist, instead
# of failing instance creation after them. Nodes boot exactly the image planned.
data "google_compute_image" "boot" {
  family  = module.node_shape.image_family
  project = module.node_shape.image_project
}

# A new image in the same family must not replace running nodes (the boot disk's image is
# ignored below); a different family or a switch of use_gpu must. This records the choice.
resource "terraform_data" "boot_image" {
  input = module.node_shape.image
}

# Multi-node runs on a machine series that supports it get their VMs placed close together
# (node_shape decides: C4 yes, N1 no). Placement policies are regional and carry no labels.
resource "google_compute_resource_policy" "placement" {
  count = module.node_shape.compact_placement ? 1 : 0

  name   = "${var.deployment_name}-placement"
  region = var.region

  group_placement_policy {
    collocation = "COLLOCATED"
  }

  depends_on = [google_project_service.required]
}

resource "google_compute_instance" "node" {
  #checkov:skip=CKV_GCP_38: boot disks use Google-managed encryption; customer-supplied keys would have to live outside Terraform and survive every `make destroy`
  count = local.vm_node_count

  name         = "${var.deployment_name}-node-${count.index}"
  zone         = var.zone
  machine_type = module.node_shape.machine_type
  tags         = [local.node_tag]
  labels = merge(local.labels, {
    gantry-role = count.index == 0 ? "master" : "worker"
  })

  # At most one policy per VM; changing it recreates the VM (node_count 1 <-> N on C4).
  resource_policies = google_compute_resource_policy.placement[*].self_link

  allow_stopping_for_update = true
  can_ip_forward            = false
  deletion_protection       = false

  boot_disk {
    auto_delete = true

    initialize_params {
      image  = data.google_compute_image.boot.self_link
      size   = module.node_shape.boot_disk_size_gb
      type   = module.node_shape.boot_disk_type
      labels = local.labels
    }
  }

  # No access_config: no public IP. Egress goes through Cloud NAT, SSH through IAP.
  network_interface {
    subnetwork = google_compute_subnetwork.nodes.id
    nic_type   = module.node_shape.nic_type
    stack_type = "IPV4_ONLY"
  }

  dynamic "guest_accelerator" {
    for_each = module.node_shape.guest_accelerators
    content {
      type  = guest_accelerator.value.type
      count = guest_accelerator.value.count
    }
  }

  scheduling {
    provisioning_model          = module.node_shape.scheduling.provisioning_model
    preemptible                 = module.node_shape.scheduling.preemptible
    automatic_restart           = module.node_shape.scheduling.automatic_restart
    on_host_maintenance         = module.node_shape.scheduling.on_host_maintenance
    instance_termination_action = module.node_shape.scheduling.instance_termination_action

    dynamic "max_run_duration" {
      for_each = module.node_shape.scheduling.max_run_duration_seconds == null ? [] : [module.node_shape.scheduling.max_run_duration_seconds]
      content {
        seconds = max_run_duration.value
      }
    }
  }

  shielded_instance_config {
    enable_secure_boot          = module.node_shape.enable_secure_boot
    enable_vtpm                 = true
    enable_integrity_monitoring = true
  }

  service_account {
    email = google_service_account.node.email
    # Access is bounded by the service account's IAM roles (iam.tf), not by scopes.
    scopes = ["cloud-platform"]
  }

  metadata = local.node_metadata

  lifecycle {
    # The launcher writes the run spec into gantry-run; runs must never show up as drift.
    ignore_changes       = [metadata["gantry-run"], boot_disk[0].initialize_params[0].image]
    replace_triggered_by = [terraform_data.boot_image]
  }

  # The first boot pulls packages through NAT and the image with the service account's roles.
  depends_on = [
    google_compute_router_nat.nodes,
    google_artifact_registry_repository_iam_member.node_reader,
    google_storage_bucket_iam_member.node_object_admin,
    google_project_iam_member.node_log_writer,
  ]
}
