"""A small stand-in for the Compute Engine REST API (compute/v1), for tests.

It serves the public JSON shapes of the calls the launcher makes, so the REAL
google-cloud-compute client can be pointed at it (``client_options.api_endpoint =
fake.endpoint``, anonymous credentials):

    projects.get                      GET /compute/v1/projects/{p}
    regions.get                       GET /compute/v1/projects/{p}/regions/{r}
    zones.list                        GET /compute/v1/projects/{p}/zones
    machineTypes.get / list           GET .../zones/{z}/machineTypes[/{name}]
    acceleratorTypes.get / list       GET .../zones/{z}/acceleratorTypes[/{name}]
    instances.list                    GET .../zones/{z}/instances
    instances / disks / addresses     GET /compute/v1/projects/{p}/aggregated/{kind}
      .aggregatedList                     (with the `labels.KEY = "VALUE"` filter)
    instances.get                     GET .../zones/{z}/instances/{name}
    instances.setMetadata             POST .../instances/{name}/setMetadata (412 on a stale fingerprint)
    instances.start                   POST .../instances/{name}/start
    instances.getSerialPortOutput     GET .../instances/{name}/serialPort?port=N&start=OFFSET
    instances.getGuestAttributes      GET .../instances/{name}/getGuestAttributes?queryPath=NS/
    networks.list / firewalls.list    GET /compute/v1/projects/{p}/global/{networks|firewalls}
    subnetworks.list / routers.list   GET /compute/v1/projects/{p}/regions/{r}/{subnetworks|routers}

State is plain dicts a test edits before (or while) the code under test runs.
Errors follow Google's JSON error shape, with an ErrorInfo detail so that
google.api_core sets ``exc.reason`` (e.g. SERVICE_DISABLED). ``fail_next(n, pattern)``
answers the next n matching requests with Google's transient 503 (backendError), as
the real API does now and then.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from local_cloud.compute_json import TRANSIENT_BODIES, _error, _filtered, _Handler, _quotas, _rfc3339
from local_cloud.loopback import LoopbackServer

REPO = Path(__file__).resolve().parents[2]  # the checkout (the package is installed editable, in place)

IMAGE_FAMILIES = REPO / "tools" / "tf-standin" / "image_families.json"

API = "/compute/v1"
SELF_LINK_ROOT = "https://www.googleapis.com/compute/v1"


@dataclass
class FakeCompute(LoopbackServer):
    project: str = "demo-project"
    project_quotas: dict[str, tuple[float, float]] = field(default_factory=dict)  # metric -> (limit, usage)
    region_quotas: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # region -> ...
    zones: dict[str, str] = field(default_factory=dict)  # zone -> region
    machine_types: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)  # zone -> name -> (cpus, mb)
    accelerator_types: dict[str, dict[str, int]] = field(default_factory=dict)  # zone -> name -> max cards
    instances: list[dict] = field(default_factory=list)  # each has "zone" (short name) and "labels"
    disks: list[dict] = field(default_factory=list)  # each has "zone"
    addresses: list[dict] = field(default_factory=list)  # each has "region"
    networks: list[dict] = field(default_factory=list)  # global; each has "name"
    firewalls: list[dict] = field(default_factory=list)  # global; each has "network" (a network name)
    subnetworks: list[dict] = field(default_factory=list)  # each has "region" and "network"
    routers: list[dict] = field(default_factory=list)  # each has "region", "network" and "nats"
    # path regex -> (http status, google error reason, message): answered before any route
    errors: dict[str, tuple[int, str, str]] = field(default_factory=dict)
    # [path regex, how many more times, (status, body)]: answered once per matching request, then gone
    flaky: list[list] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # "GET /path?query", in order
    # public image projects -> family -> "live" | "retired": the stand-in provider's catalogue, one file
    image_families: dict[str, dict[str, str]] = field(default_factory=lambda: {
        project: dict(families) for project, families in json.loads(IMAGE_FAMILIES.read_text()).items()
        if not project.startswith("_")})
    started: list[str] = field(default_factory=list)  # instances.start calls, by instance name
    stopped: list[str] = field(default_factory=list)  # instances.stop calls, by instance name
    operations: int = 0
    on_start: object = None  # called with the instance record when instances.start starts a stopped VM
    on_stop: object = None  # ... and when instances.stop stops a running one

    # ---- ready-made worlds ----
    @classmethod
    def us_central1(cls, project: str = "demo-project", gpu_quota: float = 4, cpu_quota: float = 72) -> FakeCompute:
        """us-central1 as of mid-2026, trimmed: C4 in a/b/c, N1 everywhere, T4 in a/b/c/f."""
        zones = {z: "us-central1" for z in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")}
        n1 = {"n1-standard-4": (4, 15360), "n1-standard-8": (8, 30720)}
        c4 = {"c4-highcpu-8": (8, 16384), "c4-highcpu-16": (16, 32768)}
        machine_types = {z: dict(n1) for z in zones}
        for z in ("us-central1-a", "us-central1-b", "us-central1-c"):
            machine_types[z].update(c4)
        return cls(
            project=project,
            project_quotas={"CPUS_ALL_REGIONS": (cpu_quota, 0), "GPUS_ALL_REGIONS": (gpu_quota, 0)},
            region_quotas={"us-central1": {
                "CPUS": (cpu_quota, 0), "C4_CPUS": (cpu_quota, 0), "PREEMPTIBLE_CPUS": (0, 0),
                "NVIDIA_T4_GPUS": (gpu_quota, 0), "PREEMPTIBLE_NVIDIA_T4_GPUS": (0, 0),
                "SSD_TOTAL_GB": (500, 0), "DISKS_TOTAL_GB": (4096, 0), "HYPERDISK_BALANCED_TOTAL_GB": (500, 0),
            }},
            zones=zones,
            machine_types=machine_types,
            accelerator_types={z: {"nvidia-tesla-t4": 4} for z in zones},
        )

    # ---- running ----
    @property
    def endpoint(self) -> str:
        return self.base_url

    # ---- resources ----
    def add_instance(self, name: str, zone: str, labels: dict[str, str], status: str = "RUNNING",
                     machine_type: str = "c4-highcpu-16", network_ip: str = "10.128.0.2") -> dict:
        """The instance record; tests share it with a FakeMetadata (metadata, guest attributes) and may
        set "serialPortFile" to a file whose bytes are serial port 2's output."""
        instance = {"name": name, "zone": zone, "labels": labels, "status": status, "machineType": machine_type,
                    "lastStartTimestamp": _rfc3339(time.time()),
                    "networkInterfaces": [{"networkIP": network_ip}],
                    "metadata": {"fingerprint": "fp-0", "items": []}, "guestAttributes": {}}
        self.instances.append(instance)
        return instance

    def instance(self, name: str) -> dict:
        return next(i for i in self.instances if i["name"] == name)

    def add_disk(self, name: str, zone: str, labels: dict[str, str], size_gb: int = 50) -> None:
        self.disks.append({"name": name, "zone": zone, "labels": labels, "sizeGb": str(size_gb)})

    def add_address(self, name: str, region: str, labels: dict[str, str], address: str = "34.1.2.3") -> None:
        self.addresses.append({"name": name, "region": region, "labels": labels, "address": address})

    def add_network(self, deployment: str = "gantry", region: str = "us-central1") -> None:
        """The VPC infra/network.tf creates: network, subnetwork, router with Cloud NAT, two firewall rules."""
        vpc = f"{deployment}-vpc"
        self.networks.append({"name": vpc})
        self.subnetworks.append({"name": f"{deployment}-nodes", "region": region, "network": vpc,
                                 "ipCidrRange": "10.128.0.0/20"})
        self.routers.append({"name": f"{deployment}-router", "region": region, "network": vpc,
                             "nats": [{"name": f"{deployment}-nat"}]})
        for rule in ("allow-iap-ssh", "allow-internal"):
            self.firewalls.append({"name": f"{deployment}-{rule}", "network": vpc})

    def fail_next(self, count: int, pattern: str = "", status: int = 503) -> None:
        """The next ``count`` requests whose path matches ``pattern`` get Google's transient error
        (status 0: the connection is dropped without an answer, as a reset on the way does)."""
        self.flaky.append([pattern, count, (status, TRANSIENT_BODIES[status])])

    # ---- the API ----
    def _routes(self):
        p = r"/projects/(?P<project>[^/]+)"
        z = p + r"/zones/(?P<zone>[^/]+)"
        return [
            (p + r"$", self._project),
            (p + r"/regions/(?P<region>[^/]+)$", self._region),
            (p + r"/zones$", self._zone_list),
            (p + r"/global/images/family/(?P<family>[^/]+)$", self._image_from_family),
            (p + r"/global/images$", self._image_list),
            (z + r"/machineTypes/(?P<name>[^/]+)$", self._machine_type),
            (z + r"/machineTypes$", self._machine_type_list),
            (z + r"/acceleratorTypes/(?P<name>[^/]+)$", self._accelerator_type),
            (z + r"/acceleratorTypes$", self._accelerator_type_list),
            (z + r"/instances$", self._instance_list),
            (z + r"/instances/(?P<name>[^/]+)$", self._instance_get),
            (z + r"/instances/(?P<name>[^/]+)/serialPort$", self._serial_port),
            (z + r"/instances/(?P<name>[^/]+)/getGuestAttributes$", self._guest_attributes),
            (p + r"/aggregated/(?P<kind>instances|disks|addresses)$", self._aggregated),
            (p + r"/aggregated/(?P<kind>machineTypes|acceleratorTypes)$", self._aggregated_types),
            (p + r"/global/(?P<kind>networks|firewalls)$", self._network_list),
            (p + r"/regions/(?P<region>[^/]+)/(?P<kind>subnetworks|routers)$", self._network_list),
        ]

    def _post_routes(self):
        i = r"/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)"
        return [(i + r"/setMetadata$", self._set_metadata), (i + r"/start$", self._start), (i + r"/stop$", self._stop)]

    def handle(self, path: str, query: dict[str, list[str]], body: dict | None = None) -> tuple[int, dict]:
        for flaky in self.flaky:
            if flaky[1] > 0 and re.search(flaky[0], path):
                flaky[1] -= 1
                return flaky[2]
        for pattern, (status, reason, message) in self.errors.items():
            if re.search(pattern, path):
                return status, _error(status, reason, message)
        if not path.startswith(API):
            return 404, _error(404, "notFound", f"unknown path {path}")
        for pattern, route in self._routes() if body is None else self._post_routes():
            match = re.match(pattern, path[len(API):])
            if match:
                args = match.groupdict()
                if "family" in args or route == self._image_list:  # public image projects answer anyone
                    return route(query=query, **args)
                if args.pop("project") != self.project:
                    return 404, _error(404, "notFound", f"The resource 'projects/{self.project}' was not found")
                if body is not None:
                    args["body"] = body
                return route(query=query, **args)
        return 404, _error(404, "notFound", f"no route for {path}")

    def _project(self, query):
        return 200, {"kind": "compute#project", "name": self.project, "id": "1234567890",
                     "quotas": _quotas(self.project_quotas)}

    def _region(self, query, region):
        if region not in self.region_quotas and region not in self.zones.values():
            return 404, _error(404, "notFound", f"The resource 'projects/{self.project}/regions/{region}' was not found")
        zones = [self._link(f"zones/{z}") for z, r in sorted(self.zones.items()) if r == region]
        return 200, {"kind": "compute#region", "name": region, "status": "UP", "zones": zones,
                     "quotas": _quotas(self.region_quotas.get(region, {}))}

    def _image_json(self, project, family, state):
        image = {"kind": "compute#image", "name": f"{family}-v20260101", "family": family, "status": "READY",
                 "creationTimestamp": "2026-01-01T00:00:00.000-08:00",
                 "selfLink": f"{SELF_LINK_ROOT}/projects/{project}/global/images/{family}-v20260101"}
        if state != "live":
            image["deprecated"] = {"state": "DEPRECATED" if state == "deprecated" else "OBSOLETE"}
        return image

    def _image_from_family(self, query, project, family):
        """images.getFromFamily: the newest image of a family that is not deprecated, else Google's 404."""
        if self.image_families.get(project, {}).get(family) != "live":
            return 404, _error(404, "notFound",
                               f"The resource 'projects/{project}/global/images/family/{family}' was not found")
        return 200, self._image_json(project, family, "live")

    def _image_list(self, query, project):
        items = [self._image_json(project, f, state) for f, state in self.image_families.get(project, {}).items()]
        return 200, {"kind": "compute#imageList", "items": items}

    def _zone_list(self, query):
        items = [{"kind": "compute#zone", "name": z, "status": "UP", "region": self._link(f"regions/{r}"),
                  "selfLink": self._link(f"zones/{z}")} for z, r in sorted(self.zones.items())]
        return 200, {"kind": "compute#zoneList", "items": items}

    def _machine_type_json(self, zone, name):
        cpus, mb = self.machine_types[zone][name]
        return {"kind": "compute#machineType", "name": name, "zone": zone, "guestCpus": cpus, "memoryMb": mb}

    def _machine_type(self, query, zone, name):
        if name not in self.machine_types.get(zone, {}):
            return 404, _error(404, "notFound",
                               f"The resource 'projects/{self.project}/zones/{zone}/machineTypes/{name}' was not found")
        return 200, self._machine_type_json(zone, name)

    def _machine_type_list(self, query, zone):
        items = [self._machine_type_json(zone, n) for n in sorted(self.machine_types.get(zone, {}))]
        return 200, {"kind": "compute#machineTypeList", "items": items}

    def _accelerator_json(self, zone, name):
        return {"kind": "compute#acceleratorType", "name": name, "zone": zone,
                "maximumCardsPerInstance": self.accelerator_types[zone][name]}

    def _accelerator_type(self, query, zone, name):
        if name not in self.accelerator_types.get(zone, {}):
            return 404, _error(404, "notFound",
                               f"The resource 'projects/{self.project}/zones/{zone}/acceleratorTypes/{name}' "
                               "was not found")
        return 200, self._accelerator_json(zone, name)

    def _accelerator_type_list(self, query, zone):
        items = [self._accelerator_json(zone, n) for n in sorted(self.accelerator_types.get(zone, {}))]
        return 200, {"kind": "compute#acceleratorTypeList", "items": items}

    def _instance_list(self, query, zone):
        items = [self._resource_json(i) for i in self.instances if i["zone"] == zone]
        items = _filtered(items, query)
        return 200, {"kind": "compute#instanceList", "items": items}

    def _find(self, zone, name):
        found = [i for i in self.instances if i["name"] == name and i["zone"] == zone]
        if not found:
            return None, (404, _error(404, "notFound",
                                      f"The resource 'projects/{self.project}/zones/{zone}/instances/{name}' "
                                      "was not found"))
        return found[0], None

    def _instance_get(self, query, zone, name):
        instance, error = self._find(zone, name)
        if error:
            return error
        out = self._resource_json({k: v for k, v in instance.items() if k not in ("guestAttributes",
                                                                                   "serialPortFile")})
        out["kind"] = "compute#instance"
        return 200, out

    def _operation(self, zone, name, kind):
        self.operations += 1
        return 200, {"kind": "compute#operation", "name": f"operation-{self.operations}", "status": "DONE",
                     "operationType": kind, "progress": 100, "zone": self._link(f"zones/{zone}"),
                     "targetLink": self._link(f"zones/{zone}/instances/{name}")}

    def _set_metadata(self, query, zone, name, body):
        instance, error = self._find(zone, name)
        if error:
            return error
        current = instance.setdefault("metadata", {"fingerprint": "fp-0", "items": []})
        if body.get("fingerprint") != current["fingerprint"]:
            return 412, _error(412, "conditionNotMet",
                               "Supplied fingerprint does not match current metadata fingerprint.")
        number = int(current["fingerprint"].rsplit("-", 1)[-1]) + 1
        current["items"] = list(body.get("items", []))
        current["fingerprint"] = f"fp-{number}"
        return self._operation(zone, name, "setMetadata")

    def _start(self, query, zone, name, body):
        instance, error = self._find(zone, name)
        if error:
            return error
        was = instance["status"]
        instance["status"] = "RUNNING"
        instance["lastStartTimestamp"] = _rfc3339(time.time())
        self.started.append(name)
        if self.on_start is not None and was != "RUNNING":
            self.on_start(instance)
        return self._operation(zone, name, "start")

    def _stop(self, query, zone, name, body):
        instance, error = self._find(zone, name)
        if error:
            return error
        was, instance["status"] = instance["status"], "TERMINATED"  # Compute's name for a stopped VM
        self.stopped.append(name)
        if self.on_stop is not None and was == "RUNNING":
            self.on_stop(instance)
        return self._operation(zone, name, "stop")

    def _serial_port(self, query, zone, name):
        instance, error = self._find(zone, name)
        if error:
            return error
        path = instance.get("serialPortFile")
        data = Path(path).read_bytes() if path and os.path.exists(path) else b""
        start = int(query.get("start", ["0"])[0])
        chunk = data[start:start + 1_000_000]  # GCE returns at most 1 MB per call
        return 200, {"kind": "compute#serialPortOutput", "contents": chunk.decode("utf-8", "replace"),
                     "start": str(start), "next": str(start + len(chunk))}

    def _guest_attributes(self, query, zone, name):
        instance, error = self._find(zone, name)
        if error:
            return error
        prefix = query.get("queryPath", [""])[0]
        items = []
        for path, value in sorted(instance.get("guestAttributes", {}).items()):
            if path.startswith(prefix):
                namespace, _, key = path.partition("/")
                items.append({"namespace": namespace, "key": key, "value": value})
        if not items:  # what GCE answers for a namespace nothing was written to
            return 404, _error(404, "notFound", f"The resource 'guestAttributes/{prefix}' was not found")
        return 200, {"kind": "compute#guestAttributes", "queryPath": prefix, "queryValue": {"items": items}}

    def _aggregated(self, query, kind):
        resources = {"instances": self.instances, "disks": self.disks, "addresses": self.addresses}[kind]
        scoped: dict[str, dict] = {}
        for resource in _filtered([self._resource_json(r) for r in resources], query):
            scope = f"zones/{resource['zone'].rsplit('/', 1)[-1]}" if "zone" in resource else \
                f"regions/{resource['region'].rsplit('/', 1)[-1]}"
            scoped.setdefault(scope, {kind: []})[kind].append(resource)
        # Google returns every scope, empty ones carrying a warning; keep one to exercise that path.
        for zone in sorted(self.zones):
            scoped.setdefault(f"zones/{zone}", {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                                            "message": "There are no results for scope"}})
        return 200, {"kind": f"compute#{kind}AggregatedList", "items": scoped}

    def _aggregated_types(self, query, kind):
        """machineTypes/acceleratorTypes.aggregatedList: one scope per zone, filtered by name."""
        table, as_json = ((self.machine_types, self._machine_type_json) if kind == "machineTypes" else
                          (self.accelerator_types, self._accelerator_json))
        scoped: dict[str, dict] = {}
        for zone in sorted(self.zones):
            items = _filtered([as_json(zone, name) for name in sorted(table.get(zone, {}))], query)
            scoped[f"zones/{zone}"] = {kind: items} if items else {
                "warning": {"code": "NO_RESULTS_ON_PAGE", "message": "There are no results for scope"}}
        return 200, {"kind": f"compute#{kind[:-1]}AggregatedList", "items": scoped}
    def _network_list(self, query, kind, region=None):
        singular = {"networks": "network", "firewalls": "firewall", "subnetworks": "subnetwork", "routers": "router"}
        items = []
        for resource in getattr(self, kind):
            if region is not None and resource["region"] != region:
                continue
            out = self._resource_json(resource)
            out["kind"] = f"compute#{singular[kind]}"
            out["selfLink"] = self._link(f"{'regions/' + region if region else 'global'}/{kind}/{resource['name']}")
            if "network" in out:
                out["network"] = self._link(f"global/networks/{out['network']}")
            items.append(out)
        return 200, {"kind": f"compute#{singular[kind]}List", "items": items}

    def _resource_json(self, resource: dict) -> dict:
        out = dict(resource)
        if "zone" in out:
            out["zone"] = self._link(f"zones/{out['zone']}")
        if "region" in out:
            out["region"] = self._link(f"regions/{out['region']}")
        return out

    def _link(self, rest: str) -> str:
        return f"{SELF_LINK_ROOT}/projects/{self.project}/{rest}"


FakeCompute.handler_class = _Handler
