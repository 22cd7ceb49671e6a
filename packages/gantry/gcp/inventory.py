"""After destroy: list everything in the project that still belongs to the deployment.

Terraform's state says what Terraform thinks it owns; this asks the APIs what really
exists, so a VM created by hand, a disk kept by ``auto_delete = false``, a failed destroy
or a lost state file shows up instead of billing quietly:

- Compute: instances, disks and static addresses labelled ``gantry-deployment = <name>``;
  the VPC, its subnetworks, firewall rules and routers (with the Cloud NAT), found by the
  network name (these carry no labels);
- Cloud Storage buckets and Artifact Registry repositories with the label (REST);
- the nodes' service account (REST, IAM);
- Cloud TPU nodes and queued resources with the label, in zone and fallback_zones (Cloud TPU API v2
  nodes.list and queuedResources.list, REST): a TPU VM is not a Compute instance of the project, so the
  Compute lists above never show one, and a TPU bills hundreds of dollars a day.

A section whose API cannot be asked (no permission, API disabled) is named as unchecked
rather than reported clean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gantry.config import LABEL_KEY, Deployment
from gantry.gcp import Compute, GoogleApis, short_name

# kind -> (the gcloud command that deletes one, its location flag or ""), in the order to delete them.
DELETE = {
    # A queued resource first: deleting it with --force also deletes the TPU node it created.
    "queued": ("gcloud compute tpus queued-resources delete --force", "--zone"),
    "tpu": ("gcloud compute tpus tpu-vm delete", "--zone"),
    "instance": ("gcloud compute instances delete", "--zone"),
    "disk": ("gcloud compute disks delete", "--zone"),
    "address": ("gcloud compute addresses delete", "--region"),
    "router": ("gcloud compute routers delete", "--region"),
    "firewall": ("gcloud compute firewall-rules delete", ""),
    "subnet": ("gcloud compute networks subnets delete", "--region"),
    "network": ("gcloud compute networks delete", ""),
    "repository": ("gcloud artifacts repositories delete", "--location"),
    "bucket": ("gcloud storage rm --recursive", ""),
    "account": ("gcloud iam service-accounts delete", ""),
}


def network_name(d: Deployment) -> str:
    return f"{d.deployment_name}-vpc"  # infra/network.tf: google_compute_network.vpc


def account_prefix(d: Deployment) -> str:
    return f"{d.deployment_name}-node@"  # infra/iam.tf: google_service_account.node (account_id)


@dataclass(frozen=True)
class Leftover:
    kind: str  # a key of DELETE
    name: str
    location: str  # zone, region, or "global"
    detail: str

    def delete_command(self, project: str) -> str:
        command, flag = DELETE[self.kind]
        target = f"gs://{self.name}" if self.kind == "bucket" else self.name
        where = f" {flag}={self.location}" if flag else ""
        return f"{command} {target}{where} --project={project}"


@dataclass
class Inventory:
    found: list[Leftover] = field(default_factory=list)
    unchecked: dict[str, str] = field(default_factory=dict)  # section -> why it could not be asked

    def has(self, kind: str, name: str) -> bool:
        return any(item.kind == kind and item.name == name for item in self.found)


def take(d: Deployment, compute: Compute, apis: GoogleApis | None, bucket: str = "") -> Inventory:
    """``bucket``: the runs bucket's name from terraform output, found even if its label is gone."""
    sections: dict[str, Callable[[], list[Leftover]]] = {
        "instances, disks and addresses": lambda: _labelled_compute(d, compute),
        "network, subnetworks, firewall rules and routers": lambda: _network(d, compute),
    }
    if apis is not None:
        sections.update({"buckets": lambda: _buckets(d, apis, bucket),
                         "Artifact Registry repositories": lambda: _repositories(d, apis),
                         "service accounts": lambda: _accounts(d, apis),
                         "TPU nodes and queued resources": lambda: _tpus(d, apis)})
    inventory = Inventory()
    for what, section in sections.items():
        try:
            inventory.found.extend(section())
        except Exception as exc:  # noqa: BLE001 (an API we may not ask must not hide what the others found)
            inventory.unchecked[what] = f"{getattr(exc, 'code', None) or type(exc).__name__}: {_first_line(exc)}"
    order = list(DELETE)
    inventory.found.sort(key=lambda item: order.index(item.kind))
    return inventory


def _labelled_compute(d: Deployment, compute: Compute) -> list[Leftover]:
    request = {"project": d.project_id, "filter": d.labels_filter}
    found = []
    for _, scoped in compute.instances.aggregated_list(request=request):
        found += [Leftover("instance", vm.name, short_name(vm.zone), f"{short_name(vm.machine_type)}, {vm.status}")
                  for vm in scoped.instances]
    for _, scoped in compute.disks.aggregated_list(request=request):
        found += [Leftover("disk", disk.name, short_name(disk.zone), f"{disk.size_gb} GB") for disk in scoped.disks]
    for _, scoped in compute.addresses.aggregated_list(request=request):
        found += [Leftover("address", a.name, short_name(a.region), a.address) for a in scoped.addresses]
    return found


def _network(d: Deployment, compute: Compute) -> list[Leftover]:
    vpc = network_name(d)

    def on_vpc(link: str) -> bool:
        return short_name(link) == vpc

    found = [Leftover("router", r.name, d.region, f"Cloud NAT {', '.join(n.name for n in r.nats)}" if r.nats else
                      "router") for r in compute.routers.list(project=d.project_id, region=d.region)
             if on_vpc(r.network)]
    found += [Leftover("firewall", f.name, "global", f"network {vpc}")
              for f in compute.firewalls.list(project=d.project_id) if on_vpc(f.network)]
    found += [Leftover("subnet", s.name, d.region, s.ip_cidr_range)
              for s in compute.subnetworks.list(project=d.project_id, region=d.region) if on_vpc(s.network)]
    found += [Leftover("network", n.name, "global", "VPC") for n in compute.networks.list(project=d.project_id)
              if n.name == vpc]
    return found


def _labelled(resource: dict, d: Deployment) -> bool:
    return (resource.get("labels") or {}).get(LABEL_KEY) == d.deployment_name


def _buckets(d: Deployment, apis: GoogleApis, name: str) -> list[Leftover]:
    buckets = apis.list("storage", "storage/v1/b", "items", params={"project": d.project_id})
    return [Leftover("bucket", b["name"], b.get("location", "").lower(), "runs bucket") for b in buckets
            if _labelled(b, d) or b["name"] == name]


def _repositories(d: Deployment, apis: GoogleApis) -> list[Leftover]:
    repositories = apis.list("artifactregistry", f"v1/projects/{d.project_id}/locations/{d.region}/repositories",
                             "repositories")
    return [Leftover("repository", short_name(r["name"]), d.region,
                     f"{r.get('format', '')}, {int(r.get('sizeBytes') or 0) / 1e9:.1f} GB")
            for r in repositories if _labelled(r, d)]


def _accounts(d: Deployment, apis: GoogleApis) -> list[Leftover]:
    accounts = apis.list("iam", f"v1/projects/{d.project_id}/serviceAccounts", "accounts")
    return [Leftover("account", a["email"], "global", a.get("displayName", "")) for a in accounts
            if a.get("email", "").startswith(account_prefix(d))]


def _tpus(d: Deployment, apis: GoogleApis) -> list[Leftover]:
    """Labelled TPU nodes and the queued resources whose node spec carries the label, per zone the nodes may be in
    (cloud.google.com/tpu/docs/reference/rest/v2: projects.locations.nodes.list, .queuedResources.list)."""
    from google.api_core.exceptions import Forbidden

    found = []
    for zone in dict.fromkeys((d.zone, *d.fallback_zones)):
        parent = f"v2/projects/{d.project_id}/locations/{zone}"
        try:
            nodes = apis.list("tpu", f"{parent}/nodes", "nodes")
        except Forbidden as exc:
            if getattr(exc, "reason", None) == "SERVICE_DISABLED":
                return []  # the Cloud TPU API was never enabled in the project: no TPU node can exist
            raise
        found += [Leftover("tpu", short_name(n["name"]), zone, f"{n.get('acceleratorType', '')}, {n.get('state', '')}")
                  for n in nodes if _labelled(n, d)]
        for queued in apis.list("tpu", f"{parent}/queuedResources", "queuedResources"):
            specs = (queued.get("tpu") or {}).get("nodeSpec") or []
            if any(_labelled(spec.get("node") or {}, d) for spec in specs):
                state = (queued.get("state") or {}).get("state", "")
                found.append(Leftover("queued", short_name(queued["name"]), zone, f"queued resource, {state}"))
    return found


def _first_line(exc: Exception) -> str:
    return (getattr(exc, "message", None) or str(exc)).splitlines()[0][:160]


def render(d: Deployment, inventory: Inventory, kept: str = "") -> list[str]:
    """``kept``: a bucket destroy kept on purpose (it holds run data): named, not counted."""
    label = f"{LABEL_KEY}={d.deployment_name}"
    found = leftovers(inventory, kept)
    lines = []
    if not found:
        lines.append(f"Inventory of project {d.project_id} (label {label}): no instances, disks, addresses, "
                     "network, firewall rules, routers, buckets, repositories, service account, TPU nodes or "
                     "queued resources left; "
                     + ("nothing left billing among what could be checked." if inventory.unchecked
                        else "nothing left billing."))
    else:
        lines.append(f"Inventory of project {d.project_id} (label {label}): {len(found)} resource(s) "
                     "still exist and bill:")
        lines.extend(f"  {item.kind:<10} {item.name:<40} {item.location:<16} {item.detail}" for item in found)
        lines.append("Delete them with:")
        lines.extend(f"  {item.delete_command(d.project_id)}" for item in found)
    lines.extend(f"Not checked: {what} ({why})." for what, why in inventory.unchecked.items())
    return lines


def leftovers(inventory: Inventory, kept: str = "") -> list[Leftover]:
    return [item for item in inventory.found if not (item.kind == "bucket" and item.name == kept)]
