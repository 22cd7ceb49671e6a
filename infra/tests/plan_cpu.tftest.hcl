# Plan-time checks of the root module against the stand-in google provider (tools/tf-standin),
# which serves hashicorp/google 8.7.0's schema offline: `make test` runs this through
# tests/infra/test_standin_plan.py; by hand, see docs/STANDIN.md. This file plans the CPU path
# (use_gpu = false; plan_gpu.tftest.hcl the GPU path) for every spot x node_count (1, 2); the
# 2-node runs also set max_run_hours. The first run also checks what does not depend on the
# shape: network, firewall, bucket and the service account's roles.
# Values the API computes (ids, IPs) are unknown at plan time, so only what the configuration
# decides is asserted.

variables {
  project_id      = "standin-proj"
  deployment_name = "gantry-test"
}


run "cpu_standard_1_node" {
  command = plan

  variables {
    use_gpu            = false
    spot               = false
    node_count         = 1
    max_run_hours      = 0
    termination_action = "STOP"
  }
  assert {
    condition     = length(google_compute_instance.node) == 1 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "1 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "c4-") && length(n.guest_accelerator) == 0])
    error_message = "The CPU path is a C4 shape with no accelerator block."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).type == "hyperdisk-balanced" && one(n.network_interface).nic_type == "GVNIC"])
    error_message = "C4 needs a hyperdisk-balanced boot disk and a GVNIC NIC."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "ubuntu-os-cloud" && data.google_compute_image.boot.family == "ubuntu-2404-lts-amd64" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The CPU path boots the image plan resolved from the Ubuntu LTS family."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "STANDARD" && !one(n.scheduling).preemptible && one(n.scheduling).automatic_restart])
    error_message = "Standard nodes: STANDARD provisioning that restarts after a host event."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : length(one(n.scheduling).max_run_duration) == 0])
    error_message = "max_run_hours = 0 sets no max_run_duration."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).instance_termination_action == null])
    error_message = "A standard node with no run limit sends no termination action (GCE refuses one)."
  }
  assert {
    condition     = google_compute_firewall.iap_ssh.direction == "INGRESS" && google_compute_firewall.iap_ssh.source_ranges == toset(["35.235.240.0/20"])
    error_message = "SSH must be open only to IAP's range 35.235.240.0/20."
  }
  assert {
    condition     = length(google_compute_firewall.iap_ssh.allow) == 1 && one(google_compute_firewall.iap_ssh.allow).protocol == "tcp" && one(google_compute_firewall.iap_ssh.allow).ports == tolist(["22"])
    error_message = "The IAP rule must allow tcp/22 and nothing else."
  }
  assert {
    condition     = google_compute_firewall.iap_ssh.target_tags == toset(["gantry-test-node"])
    error_message = "The IAP rule must target the deployment's node tag only."
  }
  assert {
    condition     = google_compute_firewall.internal.source_ranges == null && google_compute_firewall.internal.source_tags == toset(["gantry-test-node"]) && google_compute_firewall.internal.target_tags == toset(["gantry-test-node"])
    error_message = "Internal traffic must be open only between the deployment's tagged nodes, never from an address range."
  }
  assert {
    condition     = google_compute_router_nat.nodes.source_subnetwork_ip_ranges_to_nat == "LIST_OF_SUBNETWORKS" && google_compute_network.vpc.auto_create_subnetworks == false
    error_message = "Egress goes through Cloud NAT for the nodes' own subnet of a custom-mode VPC."
  }
  assert {
    condition     = google_project_iam_member.node_log_writer.role == "roles/logging.logWriter" && google_artifact_registry_repository_iam_member.node_reader.role == "roles/artifactregistry.reader" && google_storage_bucket_iam_member.node_object_admin.role == "roles/storage.objectAdmin"
    error_message = "The node service account gets exactly log writer, Artifact Registry reader and bucket object admin."
  }
  assert {
    condition     = google_project_iam_member.node_log_writer.project == "standin-proj" && google_storage_bucket_iam_member.node_object_admin.bucket == "standin-proj-gantry-test-runs"
    error_message = "Roles are granted on this project's logs and this deployment's bucket only."
  }
  assert {
    condition     = length(google_project_iam_custom_role.tpu_self_stop) == 0 && length(google_project_iam_member.node_tpu_self_stop) == 0
    error_message = "Only a TPU node stops itself through an API: a VM gets no TPU role (GCE enforces max_run_hours, the agent powers the VM off)."
  }
  assert {
    condition     = strcontains(module.startup_script.script, "readonly max_run_hours=\"0\"")
    error_message = "max_run_hours reaches the agent's environment (GANTRY_MAX_RUN_HOURS) from infra/variables.tf."
  }
  assert {
    condition     = google_storage_bucket.runs.uniform_bucket_level_access == true && google_storage_bucket.runs.public_access_prevention == "enforced"
    error_message = "The runs bucket must be private: uniform access and public access prevention."
  }
  assert {
    condition     = !google_artifact_registry_repository.images.cleanup_policy_dry_run && toset([for p in google_artifact_registry_repository.images.cleanup_policies : p.action]) == toset(["KEEP", "DELETE"]) && one([for p in google_artifact_registry_repository.images.cleanup_policies : one(p.condition).tag_state if p.action == "DELETE"]) == "UNTAGGED"
    error_message = "The image repository keeps the newest versions and deletes untagged ones: old CUDA images must not pile up."
  }
  assert {
    condition     = one(google_storage_bucket.runs.soft_delete_policy).retention_duration_seconds == 0
    error_message = "Soft delete must be off (retention 0): rotated checkpoints must not bill for 7 more days."
  }
  assert {
    condition     = google_storage_bucket.runs.labels["gantry-deployment"] == "gantry-test" && google_artifact_registry_repository.images.labels["gantry-deployment"] == "gantry-test" && google_artifact_registry_repository.images.format == "DOCKER"
    error_message = "The bucket and the Docker repository carry the gantry-deployment label."
  }
  assert {
    condition     = one(google_compute_instance.node[0].service_account).scopes == toset(["https://www.googleapis.com/auth/cloud-platform"]) || one(google_compute_instance.node[0].service_account).scopes == toset(["cloud-platform"])
    error_message = "Nodes run as the deployment's service account, bounded by IAM roles rather than scopes."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 0 && alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 0])
    error_message = "A single node needs no placement policy."
  }
  assert {
    condition     = google_compute_network.vpc.mtu == 8896
    error_message = "The VPC uses the largest MTU, 8896 (default 1460)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).on_host_maintenance == "MIGRATE"])
    error_message = "A single on-demand C4 node keeps live migration."
  }
}


run "cpu_standard_2_nodes" {
  command = plan

  variables {
    use_gpu            = false
    spot               = false
    node_count         = 2
    max_run_hours      = 4
    termination_action = "DELETE"
  }
  assert {
    condition     = length(google_compute_instance.node) == 2 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "2 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "c4-") && length(n.guest_accelerator) == 0])
    error_message = "The CPU path is a C4 shape with no accelerator block."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).type == "hyperdisk-balanced" && one(n.network_interface).nic_type == "GVNIC"])
    error_message = "C4 needs a hyperdisk-balanced boot disk and a GVNIC NIC."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "ubuntu-os-cloud" && data.google_compute_image.boot.family == "ubuntu-2404-lts-amd64" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The CPU path boots the image plan resolved from the Ubuntu LTS family."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "STANDARD" && !one(n.scheduling).preemptible && one(n.scheduling).automatic_restart])
    error_message = "Standard nodes: STANDARD provisioning that restarts after a host event."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.scheduling).max_run_duration).seconds == 14400 && one(n.scheduling).instance_termination_action == "DELETE"])
    error_message = "max_run_hours = 4 sets a GCE-enforced max_run_duration of 14400 s with the chosen termination action."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 1 && one(google_compute_resource_policy.placement[0].group_placement_policy).collocation == "COLLOCATED" && google_compute_resource_policy.placement[0].region == "us-central1"
    error_message = "A multi-node C4 deployment gets one compact (COLLOCATED) placement policy in its region."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 1 && one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "Every node carries the placement policy and terminates on host maintenance (compact placement allows no live migration)."
  }
}


run "cpu_spot_1_node" {
  command = plan

  variables {
    use_gpu            = false
    spot               = true
    node_count         = 1
    max_run_hours      = 2
    termination_action = "STOP"
  }
  assert {
    condition     = length(google_compute_instance.node) == 1 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "1 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "c4-") && length(n.guest_accelerator) == 0])
    error_message = "The CPU path is a C4 shape with no accelerator block."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).type == "hyperdisk-balanced" && one(n.network_interface).nic_type == "GVNIC"])
    error_message = "C4 needs a hyperdisk-balanced boot disk and a GVNIC NIC."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "ubuntu-os-cloud" && data.google_compute_image.boot.family == "ubuntu-2404-lts-amd64" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The CPU path boots the image plan resolved from the Ubuntu LTS family."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "SPOT" && one(n.scheduling).preemptible && !one(n.scheduling).automatic_restart && one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "Spot nodes: SPOT provisioning, preemptible, no automatic restart, TERMINATE on maintenance."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.scheduling).max_run_duration).seconds == 7200])
    error_message = "Spot nodes carry the GCE-enforced run limit (max_run_hours = 2 is 7200 s)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).instance_termination_action == "STOP"])
    error_message = "Spot nodes carry the chosen termination action."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 0 && alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 0])
    error_message = "A single node needs no placement policy."
  }
}


run "cpu_spot_2_nodes" {
  command = plan

  variables {
    use_gpu            = false
    spot               = true
    node_count         = 2
    max_run_hours      = 4
    termination_action = "DELETE"
  }
  assert {
    condition     = length(google_compute_instance.node) == 2 && google_compute_instance.node[0].labels["gantry-role"] == "master"
    error_message = "2 node(s), node 0 labelled the master."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : alltrue([for nic in n.network_interface : length(nic.access_config) == 0])])
    error_message = "No node may have an access_config (no public IP)."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : n.labels["gantry-deployment"] == "gantry-test" && one(one(n.boot_disk).initialize_params).labels["gantry-deployment"] == "gantry-test"])
    error_message = "Every node and its boot disk carry the gantry-deployment label."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : startswith(n.machine_type, "c4-") && length(n.guest_accelerator) == 0])
    error_message = "The CPU path is a C4 shape with no accelerator block."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).type == "hyperdisk-balanced" && one(n.network_interface).nic_type == "GVNIC"])
    error_message = "C4 needs a hyperdisk-balanced boot disk and a GVNIC NIC."
  }
  assert {
    condition     = data.google_compute_image.boot.project == "ubuntu-os-cloud" && data.google_compute_image.boot.family == "ubuntu-2404-lts-amd64" && alltrue([for n in google_compute_instance.node : one(one(n.boot_disk).initialize_params).image == data.google_compute_image.boot.self_link])
    error_message = "The CPU path boots the image plan resolved from the Ubuntu LTS family."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(n.scheduling).provisioning_model == "SPOT" && one(n.scheduling).preemptible && !one(n.scheduling).automatic_restart && one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "Spot nodes: SPOT provisioning, preemptible, no automatic restart, TERMINATE on maintenance."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : one(one(n.scheduling).max_run_duration).seconds == 14400 && one(n.scheduling).instance_termination_action == "DELETE"])
    error_message = "max_run_hours = 4 sets a GCE-enforced max_run_duration of 14400 s with the chosen termination action."
  }
  assert {
    condition     = length(google_compute_resource_policy.placement) == 1 && one(google_compute_resource_policy.placement[0].group_placement_policy).collocation == "COLLOCATED" && google_compute_resource_policy.placement[0].region == "us-central1"
    error_message = "A multi-node C4 deployment gets one compact (COLLOCATED) placement policy in its region."
  }
  assert {
    condition     = alltrue([for n in google_compute_instance.node : length(n.resource_policies) == 1 && one(n.scheduling).on_host_maintenance == "TERMINATE"])
    error_message = "Every node carries the placement policy and terminates on host maintenance (compact placement allows no live migration)."
  }
}
