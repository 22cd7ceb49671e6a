locals {
  # The one label that ties every billable thing to this deployment; `make destroy` searches
  # for it to prove nothing is left.
  labels = { gantry-deployment = var.deployment_name }

  # Firewall rules target this tag: only the deployment's own nodes talk to each other.
  node_tag = "${var.deployment_name}-node"

  # The largest MTU a VPC allows (default 1460): fewer packets for the nodes' gloo/nccl traffic.
  # Every interface in the VPC uses it; Cloud NAT, Private Google Access and IAP work with it.
  vpc_mtu = 8896

  # Google's published source range for IAP TCP forwarding: the only way in over SSH.
  iap_source_range = "35.235.240.0/20"

  # serviceusage and cloudresourcemanager must be on before the first apply (gantry.preflight.project_setup.SETUP_APIS:
  # Terraform enables the rest through the one and grants the nodes' roles through the other); listed here too so
  # the deployment records that it relies on them.
  required_apis = concat([
    "artifactregistry.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    "iap.googleapis.com",
    "logging.googleapis.com",
    "oslogin.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
  ], var.use_tpu ? ["tpu.googleapis.com"] : [])

  # ---- the node kind: C4 CPU or N1 + GPU VMs (main.tf, modules/node_shape), or one TPU VM (tpu.tf) ----
  vm_node_count  = var.use_tpu ? 0 : var.node_count
  tpu_node_count = var.use_tpu ? 1 : 0

  # Google's recommended TPU software version for PyTorch and JAX: v2-alpha-tpuv5-lite on v5e
  # (v5litepod-*), tpu-ubuntu2204-base on v4 and older (cloud.google.com/tpu/docs/runtimes).
  tpu_runtime_version = coalesce(var.tpu_runtime_version,
  startswith(var.tpu_type, "v5litepod-") ? "v2-alpha-tpuv5-lite" : "tpu-ubuntu2204-base")

  # The CUDA of the trainer's CUDA image, one fact in docker/torch.json (install_torch.sh holds the image to it):
  # GPU nodes' boot check requires the driver to run it. required_cuda_version overrides it on purpose.
  required_cuda_version = coalesce(var.required_cuda_version, jsondecode(file("${path.module}/../docker/torch.json")).cuda)

  registry_host        = "${var.region}-docker.pkg.dev"
  image_repository_url = "${local.registry_host}/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
  bucket_name          = coalesce(var.bucket_name, "${var.project_id}-${var.deployment_name}-runs")

  # The node agent ships as instance metadata: its package (packages/gantry_agent) as one JSON object of file name ->
  # source, which the startup script unpacks, and the launch contract it imports (stdlib-only code both: the VM's
  # system Python runs them). gantry_agent.shipped_files() builds the same object for the tests and the node twin.
  agent_package_dir    = "${path.module}/../packages/gantry_agent"
  agent_bundle         = jsonencode({ for name in fileset(local.agent_package_dir, "*.py") : name => file("${local.agent_package_dir}/${name}") })
  contract_source_path = "${path.module}/../packages/launch_contract.py"

  node_metadata = merge(
    {
      enable-oslogin                                = "TRUE"
      enable-guest-attributes                       = "TRUE"
      block-project-ssh-keys                        = "TRUE"
      startup-script                                = module.startup_script.script
      (module.startup_script.agent_metadata_key)    = local.agent_bundle
      (module.startup_script.contract_metadata_key) = file(local.contract_source_path)
    },
    # Older Deep Learning VM families install the driver at first boot only when asked.
    var.use_gpu ? { install-nvidia-driver = "True" } : {},
  )
}
