# A private VPC of the deployment's own: no public IPs, egress through Cloud NAT, SSH only
# through IAP, and node-to-node traffic (torchrun rendezvous, gloo/nccl) only between tagged nodes.

resource "google_compute_network" "vpc" {
  name                    = "${var.deployment_name}-vpc"
  auto_create_subnetworks = false
  routing_mode            = "REGIONAL"
  mtu                     = local.vpc_mtu

  depends_on = [google_project_service.required]
}

resource "google_compute_subnetwork" "nodes" {
  #checkov:skip=CKV_GCP_26: VPC flow logs are billed per GB and would log every gloo/nccl packet of a short-lived training network with no inbound path (no public IPs, IAP-only SSH)
  name          = "${var.deployment_name}-nodes"
  region        = var.region
  network       = google_compute_network.vpc.id
  ip_cidr_range = var.subnet_cidr
  stack_type    = "IPV4_ONLY"
  # Artifact Registry and GCS are reached over Google's network, not through NAT.
  private_ip_google_access = true
}

resource "google_compute_router" "nat" {
  name    = "${var.deployment_name}-router"
  region  = var.region
  network = google_compute_network.vpc.id
}

resource "google_compute_router_nat" "nodes" {
  name                               = "${var.deployment_name}-nat"
  router                             = google_compute_router.nat.name
  region                             = var.region
  nat_ip_allocate_option             = "AUTO_ONLY"
  source_subnetwork_ip_ranges_to_nat = "LIST_OF_SUBNETWORKS"

  subnetwork {
    name                    = google_compute_subnetwork.nodes.id
    source_ip_ranges_to_nat = ["ALL_IP_RANGES"]
  }

  log_config {
    enable = true
    filter = "ERRORS_ONLY"
  }
}

resource "google_compute_firewall" "iap_ssh" {
  name          = "${var.deployment_name}-allow-iap-ssh"
  network       = google_compute_network.vpc.id
  direction     = "INGRESS"
  source_ranges = [local.iap_source_range]
  target_tags   = [local.node_tag]

  allow {
    protocol = "tcp"
    ports    = ["22"]
  }

  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

resource "google_compute_firewall" "internal" {
  name        = "${var.deployment_name}-allow-internal"
  network     = google_compute_network.vpc.id
  direction   = "INGRESS"
  source_tags = [local.node_tag]
  target_tags = [local.node_tag]

  # torchrun's c10d store, gloo and nccl pick ports at run time: open every port, but only
  # between the deployment's nodes.
  allow {
    protocol = "tcp"
  }
  allow {
    protocol = "udp"
  }
  allow {
    protocol = "icmp"
  }
}
