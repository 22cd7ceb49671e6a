"""Deterministic, clearly fake values for what the real Google APIs would compute.

Shapes follow the real provider (ids `projects/P/zones/Z/instances/N`, self links under
`https://www.googleapis.com/compute/v1/`, service-account emails) so references and string
functions in infra/ behave as they will against GCP; anything with no source in the
configuration says `standin`. Internal IPs come from the subnet's own range: subnets seen by
this provider (planned, applied or refreshed) are remembered in a small JSON file beside
Terraform's working data, because Terraform starts a fresh provider process for every walk.
"""

import fcntl
import hashlib
import ipaddress
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

from tf.types import Unknown

FALLBACK_PROJECT = "standin-project"
FALLBACK_REGION = "us-central1"
FALLBACK_CIDR = "10.128.0.0/20"  # GCP's auto-mode range for us-central1, used when a subnet was never seen
COMPUTE = "https://www.googleapis.com/compute/v1/"
ATTRIBUTION_LABEL = {"goog-terraform-provisioned": "true"}  # added by provider >= 6 unless turned off

ID_TEMPLATES = {
    "google_artifact_registry_repository": "projects/{project}/locations/{location}/repositories/{repository_id}",
    "google_artifact_registry_repository_iam_member":
        "projects/{project}/locations/{location}/repositories/{repository}/{role}/{member}",
    "google_compute_address": "projects/{project}/regions/{region}/addresses/{name}",
    "google_compute_disk": "projects/{project}/zones/{zone}/disks/{name}",
    "google_compute_firewall": "projects/{project}/global/firewalls/{name}",
    "google_compute_instance": "projects/{project}/zones/{zone}/instances/{name}",
    "google_compute_instance_template": "projects/{project}/global/instanceTemplates/{name}",
    "google_compute_network": "projects/{project}/global/networks/{name}",
    "google_compute_resource_policy": "projects/{project}/regions/{region}/resourcePolicies/{name}",
    "google_compute_router": "projects/{project}/regions/{region}/routers/{name}",
    "google_compute_router_nat": "{project}/{region}/{router}/{name}",
    "google_compute_subnetwork": "projects/{project}/regions/{region}/subnetworks/{name}",
    "google_project_iam_custom_role": "projects/{project}/roles/{role_id}",
    "google_project_iam_member": "{project}/{role}/{member}",
    "google_project_service": "{project}/{service}",
    "google_service_account": "projects/{project}/serviceAccounts/{email}",
    "google_storage_bucket": "{name}",
    "google_storage_bucket_iam_member": "b/{bucket}/{role}/{member}",
    "google_tpu_v2_vm": "projects/{project}/locations/{zone}/nodes/{name}",  # google-beta
}


def digits(seed: str, n: int = 19) -> str:
    """A stable numeric string (GCE ids, project numbers) derived from seed."""
    return str(int(hashlib.sha256(seed.encode()).hexdigest(), 16))[:n]


def last_segment(ref) -> str:
    return str(ref).rstrip("/").rsplit("/", 1)[-1]


# ---- subnets and internal IPs ----
def _ipam_path() -> Path:
    return Path(os.environ.get("TF_DATA_DIR", ".terraform")) / "standin-ipam.json"


@contextmanager
def _ipam():
    path = _ipam_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # grpc serves calls on threads; plan and apply may overlap
        data = json.loads(path.read_text()) if path.exists() else {"subnets": {}, "addresses": {}}
        yield data
        path.write_text(json.dumps(data, indent=1, sort_keys=True))


def remember_subnet(state: dict) -> None:
    name, cidr = state.get("name"), state.get("ip_cidr_range")
    if isinstance(name, str) and isinstance(cidr, str):
        with _ipam() as data:
            data["subnets"][name] = cidr


def internal_ip(subnetwork, owner: str) -> str:
    """An address inside the subnet's range, stable for `owner`, never one handed to someone else."""
    with _ipam() as data:
        net = ipaddress.ip_network(data["subnets"].get(last_segment(subnetwork), FALLBACK_CIDR), strict=False)
        taken = {ip for ip, who in data["addresses"].items() if who != owner}
        usable = net.num_addresses - 4  # GCP reserves network, gateway, second-to-last and broadcast
        start = int(hashlib.sha256(owner.encode()).hexdigest(), 16) % usable
        for step in range(usable):
            ip = str(net.network_address + 2 + (start + step) % usable)
            if ip not in taken:
                data["addresses"][ip] = owner
                return ip
    raise RuntimeError(f"stand-in: subnet {subnetwork} has no free address left")


def gateway(cidr: str) -> str:
    return str(ipaddress.ip_network(cidr, strict=False).network_address + 1)


# ---- labels ----
def planned_labels(state: dict, provider: dict) -> tuple:
    """(terraform_labels, effective_labels) as the provider plans them from `labels` and default_labels."""
    labels = state.get("labels")
    if labels is Unknown or any(v is Unknown for v in (labels or {}).values()):
        return Unknown, Unknown
    terraform = {**(provider.get("default_labels") or {}), **(labels or {})}
    attribution = ATTRIBUTION_LABEL if provider.get("add_terraform_attribution_label", True) is not False else {}
    return terraform, {**attribution, **terraform}


# ---- resources ----
class Inventor:
    """Fills the unknown (computed) values of one resource on apply."""

    def __init__(self, type_name: str, provider: dict):
        self.type_name = type_name
        self.provider = provider

    def defaults(self) -> dict:
        region = self.provider.get("region") or FALLBACK_REGION
        return {"project": self.provider.get("project") or FALLBACK_PROJECT, "region": region,
                "zone": self.provider.get("zone") or f"{region}-a", "location": region}

    def top(self, state: dict) -> None:
        """Top-level attributes, in an order where ids can use names, projects and emails."""
        d = self.defaults()
        for key in ("project", "region", "zone", "location"):
            if state.get(key) is Unknown:
                state[key] = d["region"] if key == "location" else d[key]
        if self.type_name == "google_project_iam_custom_role" and state.get("name") is Unknown:
            state["name"] = f"projects/{state['project']}/roles/{state['role_id']}"  # the provider's name is the id
        if state.get("name") is Unknown:
            state["name"] = f"{state.get('name_prefix') or 'standin-'}{digits(self.type_name + str(state), 8)}"
        if self.type_name == "google_service_account":
            email = f"{state['account_id']}@{state['project']}.iam.gserviceaccount.com"
            state.update({k: v for k, v in (("email", email), ("member", f"serviceAccount:{email}"),
                                             ("name", f"projects/{state['project']}/serviceAccounts/{email}"))
                          if state.get(k) is Unknown})
        if state.get("id") is Unknown:
            fields = {k: (v if v is not Unknown else "standin") for k, v in state.items()}
            template = ID_TEMPLATES.get(self.type_name, "projects/{project}/standin/" + self.type_name + "/{name}")
            try:
                state["id"] = template.format_map({**d, **fields})
            except (KeyError, IndexError):
                state["id"] = f"standin/{self.type_name}/{digits(str(sorted(fields.items())), 12)}"
        if state.get("self_link") is Unknown:
            state["self_link"] = (f"https://www.googleapis.com/storage/v1/b/{state['name']}"
                                  if self.type_name == "google_storage_bucket" else COMPUTE + state["id"])
        if "effective_labels" in state:
            terraform, effective = planned_labels(state, self.provider)
            for key, value in (("terraform_labels", terraform), ("effective_labels", effective)):
                if state.get(key) is Unknown:
                    state[key] = value

    def value(self, path: tuple, attr: dict, state: dict, index: int = 0):
        """An invented value for attribute `path` (block names, no indexes) described by `attr`."""
        name, ctype = path[-1], attr["type"]
        seed = f"{self.type_name}/{state.get('id')}/{'.'.join(path)}/{index}"
        if self.type_name == "google_tpu_v2_vm" and path == ("network_endpoints",):
            # One worker per single-host TPU VM: its internal IP in the subnet, the TPU runtime's
            # port 8470, no access_config (no external IP), as `gcloud compute tpus tpu-vm describe` shows.
            subnet = ((state.get("network_config") or [{}])[0] or {}).get("subnetwork") or ""
            return [{"ip_address": internal_ip(subnet, f"{state['id']}#0"), "port": 8470, "access_config": []}]
        if path == ("network_interface", "name"):
            return f"nic{index}"
        if name in ("project", "zone", "region", "location") and ctype == "string":
            return state.get(name) if state.get(name) not in (None, Unknown) else self.defaults()[name]
        special = self.SPECIAL.get(name)
        if special is not None and ctype in ("string", "number"):
            return special(self, state, index, seed)
        if attr.get("optional"):  # SDKv2 stores an unset optional+computed value as its zero value
            return zero(ctype)
        return generic(ctype, name, seed)

    def _scheduling(self, state: dict) -> dict:
        sched = state.get("scheduling") or [{}]
        return sched[0] if isinstance(sched[0], dict) else {}

    SPECIAL: ClassVar[dict] = {  # what the API would answer, in the API's own shape
        "network_ip": lambda self, st, i, seed: internal_ip(self._nic(st, i).get("subnetwork") or "", f"{st['id']}#{i}"),
        "gateway_address": lambda self, st, i, seed: gateway(st.get("ip_cidr_range") or FALLBACK_CIDR),
        "instance_id": lambda self, st, i, seed: digits(seed),
        "unique_id": lambda self, st, i, seed: digits(seed, 21),
        "number": lambda self, st, i, seed: digits(seed, 12),
        "url": lambda self, st, i, seed: f"gs://{st.get('name')}",
        "current_status": lambda self, st, i, seed: "RUNNING",
        "device_name": lambda self, st, i, seed: "persistent-disk-0",
        "subnetwork_project": lambda self, st, i, seed: st.get("project"),
        "network": lambda self, st, i, seed: f"{COMPUTE}projects/{st.get('project')}/global/networks/standin-network",
        "source": lambda self, st, i, seed: f"{COMPUTE}projects/{st.get('project')}/zones/{st.get('zone')}/disks/"
                                            f"{st.get('name')}",
        "on_host_maintenance": lambda self, st, i, seed: "TERMINATE" if st.get("guest_accelerator")
                                            or self._scheduling(st).get("preemptible") else "MIGRATE",
        "provisioning_model": lambda self, st, i, seed: "SPOT" if self._scheduling(st).get("preemptible")
                                            else "STANDARD",
        "stack_type": lambda self, st, i, seed: "IPV4_ONLY",
        "architecture": lambda self, st, i, seed: "X86_64",
        "routing_mode": lambda self, st, i, seed: "REGIONAL",
        "purpose": lambda self, st, i, seed: "PRIVATE",
        "size": lambda self, st, i, seed: 10,
        "mtu": lambda self, st, i, seed: 1460,
    }

    @staticmethod
    def _nic(state: dict, index: int) -> dict:
        nics = state.get("network_interface") or []
        return nics[index] if index < len(nics) and isinstance(nics[index], dict) else {}


def zero(ctype):
    return {"string": "", "number": 0, "bool": False}.get(ctype) if isinstance(ctype, str) else generic(ctype, "", "")


def generic(ctype, name: str, seed: str):
    if ctype == "string":
        return f"standin-{name.replace('_', '-')}"
    if ctype == "number":
        return 0
    if ctype == "bool":
        return False
    if isinstance(ctype, list) and ctype[0] in ("list", "set"):
        return []
    if isinstance(ctype, list) and ctype[0] == "map":
        return {}
    return None


# ---- image families ----
# The public image families infra/ may name, as Google's catalogue answers them. A family lookup
# (images.getFromFamily) returns the newest image that is not deprecated; once a family is past its
# end of support it has none, and the API answers 404, which the provider wraps as below. Projects
# not listed here (a user's own images) are answered with an invented image, unchecked.
# Sources: Google's Deep Learning VM image table (cloud.google.com/deep-learning-vm/docs/images) as
# issue 16 quotes it (common-cu128-ubuntu-2204-nvidia-570: end of support April 2026), and
# common-cu129-ubuntu-2204-nvidia-580 as public 2026 deployments name it. Only families with a
# source are listed; refresh this table when infra/'s defaults change.
# Google's image catalogue as the stand-ins see it (project -> family -> "live" | "retired"); the local
# Compute server of tests/launcher answers images.getFromFamily from the same file.
IMAGE_FAMILIES = {project: families for project, families in
                  json.loads((Path(__file__).with_name("image_families.json")).read_text()).items()
                  if not project.startswith("_")}


class NotFound(Exception):
    """What the provider reports when the API answers 404; the message is Terraform's error line."""


def image_from_family(project: str, family: str) -> None:
    """Raise NotFound, as images.getFromFamily would, for a family of a known project that has no live image."""
    families = IMAGE_FAMILIES.get(project)
    if families is not None and families.get(family) != "live":
        raise NotFound(f"error retrieving image information: googleapi: Error 404: The resource "
                       f"'projects/{project}/global/images/family/{family}' was not found, notFound")


# ---- data sources ----
def read_data_source(type_name: str, config: dict, attrs: dict, provider: dict) -> dict:
    """Config plus invented values for every computed attribute the config left null."""
    d = Inventor(type_name, provider).defaults()
    state = dict(config)
    project = config.get("project") or config.get("project_id") or d["project"]
    region = config.get("region") or d["region"]
    known: dict = {"project": project, "region": region, "zone": d["zone"]}
    if type_name == "google_compute_image":
        if config.get("family") and not config.get("name"):
            image_from_family(project, config["family"])
        name = config.get("name") or f"{config.get('family') or 'standin'}-standin-v20260101"
        known.update(name=name, family=config.get("family") or "standin-family", status="READY", disk_size_gb=10,
                     id=f"projects/{project}/global/images/{name}", image_id=digits(name),
                     self_link=f"{COMPUTE}projects/{project}/global/images/{name}",
                     description="stand-in image: its existence was not checked against the real catalogue")
    elif type_name == "google_compute_zones":
        known.update(names=[f"{region}-{s}" for s in "abc"], id=f"projects/{project}/regions/{region}")
    elif type_name == "google_client_config":
        known.update(access_token="standin-access-token-not-a-secret",
                      id=f"projects/{project}/regions/{region}/zones/{d['zone']}",
                      default_labels=provider.get("default_labels") or {})
    elif type_name == "google_project":
        pid = config.get("project_id") or project
        known.update(project_id=pid, name=pid, number=digits(pid, 12), id=f"projects/{pid}", org_id="standin-org")
    elif type_name == "google_compute_default_service_account":
        email = f"{digits(project, 12)}-compute@developer.gserviceaccount.com"
        known.update(email=email, member=f"serviceAccount:{email}", unique_id=digits(email, 21),
                     name=f"projects/{project}/serviceAccounts/{email}", display_name="standin default compute SA")
    elif type_name in ("google_compute_network", "google_compute_subnetwork"):
        kind = "global/networks" if type_name == "google_compute_network" else f"regions/{region}/subnetworks"
        name = config.get("name") or last_segment(config.get("self_link") or "standin")
        known.update(name=name, id=f"projects/{project}/{kind}/{name}",
                     self_link=f"{COMPUTE}projects/{project}/{kind}/{name}", ip_cidr_range=FALLBACK_CIDR,
                     gateway_address=gateway(FALLBACK_CIDR),
                     network=f"{COMPUTE}projects/{project}/global/networks/standin-network")
    for key, attr in attrs.items():
        if attr.get("computed") and state.get(key) is None:
            state[key] = known[key] if key in known else generic(attr["type"], key, f"{type_name}/{key}")
    return state
