"""A stand-in for the Google REST APIs the launcher calls without a client library, on one port
(``GANTRY_GOOGLEAPIS_ENDPOINT`` replaces https://SERVICE.googleapis.com; the paths do not collide):

    storage.buckets.list                   GET  /storage/v1/b?project=P
    artifactregistry repositories.list     GET  /v1/projects/P/locations/L/repositories
    iam serviceAccounts.list               GET  /v1/projects/P/serviceAccounts
    cloudresourcemanager (v1)              POST /v1/projects/P:getEffectiveOrgPolicy {"constraint": ...}
      projects.getEffectiveOrgPolicy
    serviceusage (v1) services.get         GET  /v1/projects/P/services/SERVICE
    tpu (v2) acceleratorTypes.get          GET  /v2/projects/P/locations/ZONE/acceleratorTypes/TYPE
    tpu (v2) nodes.get / nodes.patch       GET, PATCH /v2/projects/P/locations/ZONE/nodes/NAME (?updateMask=metadata)
    tpu (v2) nodes:getGuestAttributes,     POST /v2/projects/P/locations/ZONE/nodes/NAME:getGuestAttributes|:start|:stop
      nodes:start, nodes:stop
    tpu (v2) operations.get                GET  /v2/projects/P/locations/ZONE/operations/ID
    tpu (v2) nodes.list                    GET  /v2/projects/P/locations/ZONE/nodes
    tpu (v2) queuedResources.list          GET  /v2/projects/P/locations/ZONE/queuedResources
    cloudquotas (v1) quotaInfos.list       GET  /v1/projects/P/locations/global/services/tpu.googleapis.com/quotaInfos

Answers and errors follow each API's public JSON shapes; ``errors`` maps a path regex to
(status, Google's error body) answered before any route.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

from local_cloud.loopback import LoopbackServer, StandInHandler


@dataclass
class FakeGoogleApis(LoopbackServer):
    project: str = "demo-project"
    buckets: list[dict] = field(default_factory=list)  # {"name", "location", "labels"}
    repositories: list[dict] = field(default_factory=list)  # {"name": short, "location", "labels"}
    accounts: list[str] = field(default_factory=list)  # emails
    # constraint (without "constraints/") -> the Policy body's rule, e.g. {"booleanPolicy": {"enforced": True}}
    policies: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, tuple[int, dict]] = field(default_factory=dict)
    # APIs off in the project: services.get says DISABLED, and a call to one answers 403 SERVICE_DISABLED
    disabled_services: set[str] = field(default_factory=set)
    project_number: str = "123456789012"
    requests: list[str] = field(default_factory=list)
    # zone -> the TPU types the Cloud TPU API lists there (a few of Google's, as in infra/tpu_zones.json)
    tpu_types: dict[str, list[str]] = field(default_factory=lambda: {
        "us-central1-a": ["v3-8", "v5litepod-1", "v5litepod-4", "v5litepod-8"],
        "us-central1-b": ["v2-8", "v3-8"],
        "us-central2-b": ["v4-8"],
    })

    # name -> a Cloud TPU v2 Node as nodes.get answers it (add_tpu_node); "guestAttributes" holds what the agent wrote
    # as {"NAMESPACE/KEY": value}, and is not part of the answer
    tpu_nodes: dict[str, dict] = field(default_factory=dict)
    operations: dict[str, dict] = field(default_factory=dict)  # name -> a google.longrunning.Operation
    tpu_actions: list[str] = field(default_factory=list)  # "start NAME", "stop NAME", "patch NAME updateMask"
    quota_infos: list[dict] = field(default_factory=list)  # Cloud Quotas QuotaInfo of tpu.googleapis.com
    queued_resources: dict[str, dict] = field(default_factory=dict)  # name -> a Cloud TPU v2 QueuedResource

    def add_tpu_node(self, name: str, zone: str = "us-central1-a", tpu_type: str = "v3-8", state: str = "READY",
                     spot: bool = False, metadata: dict | None = None) -> dict:
        """A TPU VM as infra/tpu.tf creates it: labelled, on the private subnet, the agent in its metadata."""
        node = {"name": f"projects/{self.project}/locations/{zone}/nodes/{name}", "acceleratorType": tpu_type,
                "state": state, "runtimeVersion": "tpu-ubuntu2204-base", "health": "HEALTHY",
                "networkEndpoints": [{"ipAddress": "10.128.0.2", "port": 8470}],
                "labels": {"gantry-deployment": "gantry", "gantry-role": "master"}, "apiVersion": "V2",
                "metadata": dict(metadata if metadata is not None else
                                 {"gantry-agent": "# the agent", "startup-script": "#!/bin/bash"}),
                "guestAttributes": {}}
        if spot:
            node["schedulingConfig"] = {"spot": True}
        self.tpu_nodes[name] = node
        return node

    def add_queued_resource(self, name: str, zone: str = "us-central1-a", node_id: str = "gantry-tpu-0",
                            labels: dict | None = None, state: str = "WAITING_FOR_RESOURCES") -> dict:
        """A QueuedResource as queuedResources.get answers it (cloud.google.com/tpu/docs/reference/rest/v2/
        projects.locations.queuedResources): no labels of its own; the node it will create carries them."""
        parent = f"projects/{self.project}/locations/{zone}"
        node = {"acceleratorType": "v5litepod-4", "runtimeVersion": "v2-alpha-tpuv5-lite",
                "labels": {"gantry-deployment": "gantry"} if labels is None else labels}
        queued = {"name": f"{parent}/queuedResources/{name}", "createTime": "2026-11-26T10:00:00Z",
                  "tpu": {"nodeSpec": [{"parent": parent, "nodeId": node_id, "node": node}]}, "spot": {},
                  "state": {"state": state, "stateInitiator": "USER"}}
        self.queued_resources[name] = queued
        return queued

    def quota(self, quota_id: str, zones: dict[str, int | None], default: int | None = None,
              unit: str = "1/{project}/{zone}") -> dict:
        """A per-zone QuotaInfo as Cloud Quotas lists it: one DimensionsInfo per zone given (None: an empty
        ``details``, the zone zeroed) and, with ``default``, the one with no dimensions that applies elsewhere."""
        infos = [{"dimensions": {"zone": zone}, "details": {} if value is None else {"value": str(value)},
                  "applicableLocations": [zone]} for zone, value in zones.items()]
        if default is not None:
            infos.append({"details": {"value": str(default)}, "applicableLocations": sorted(zones) or ["us-central1-a"]})
        info = {"name": f"projects/{self.project}/locations/global/services/tpu.googleapis.com/quotaInfos/{quota_id}",
                "quotaId": quota_id, "metric": "tpu.googleapis.com/" + quota_id.lower(),
                "service": "tpu.googleapis.com", "isPrecise": True, "containerType": "PROJECT",
                "dimensions": ["zone"], "metricDisplayName": quota_id, "quotaDisplayName": quota_id,
                "metricUnit": unit, "dimensionsInfos": infos}
        self.quota_infos.append(info)
        return info

    def _operation(self, zone: str, verb: str, node: dict) -> dict:
        name = f"projects/{self.project}/locations/{zone}/operations/operation-{len(self.operations) + 1}"
        operation = {"name": name, "metadata": {"@type": "type.googleapis.com/google.cloud.tpu.v2.OperationMetadata",
                                                "target": node["name"], "verb": verb, "apiVersion": "v2"},
                     "done": False}  # the first operations.get says done: the launcher must poll
        self.operations[name] = {**operation, "done": True, "response": {
            "@type": "type.googleapis.com/google.cloud.tpu.v2.Node", **self._public(node)}}
        return operation

    @staticmethod
    def _public(node: dict) -> dict:
        return {k: v for k, v in node.items() if k != "guestAttributes"}

    def _tpu_node(self, method: str, zone: str, name: str, verb: str, query: dict, body: dict) -> tuple[int, dict]:
        node = self.tpu_nodes.get(name)
        full = f"projects/{self.project}/locations/{zone}/nodes/{name}"
        if node is None or node["name"] != full:
            return 404, error(404, "NOT_FOUND", f"Resource '{full}' was not found")
        if method == "GET" and not verb:
            return 200, self._public(node)
        if method == "PATCH" and not verb:
            mask = query.get("updateMask", [""])[0]
            if mask != "metadata":
                return 400, error(400, "INVALID_ARGUMENT", f"Invalid update mask: {mask!r}")
            node["metadata"] = dict(body.get("metadata") or {})
            self.tpu_actions.append(f"patch {name} {mask}")
            return 200, self._operation(zone, "update", node)
        if method == "POST" and verb == "getGuestAttributes":
            prefix = body.get("queryPath", "")
            items = [{"namespace": key.split("/", 1)[0], "key": key.split("/", 1)[1], "value": value}
                     for key, value in node["guestAttributes"].items() if key.startswith(prefix)]
            if not items:  # as Compute answers an empty namespace
                return 404, error(404, "NOT_FOUND", f"The resource '{full}' guest attributes at '{prefix}' were not "
                                                    "found")
            return 200, {"guestAttributes": [{"queryPath": prefix, "queryValue": {"items": items}, "workerId": "0"}]}
        if method == "POST" and verb in ("start", "stop"):
            if node["state"] == "PREEMPTED":
                return 400, error(400, "FAILED_PRECONDITION", f"Cannot {verb} a preempted node '{full}'")
            node["state"] = "READY" if verb == "start" else "STOPPED"
            self.tpu_actions.append(f"{verb} {name}")
            return 200, self._operation(zone, verb, node)
        return 404, error(404, "NOT_FOUND", f"no route for {method} {full}:{verb}")

    def service_disabled(self, service: str) -> dict:
        """A call to an API that is off in the project: 403 PERMISSION_DENIED whose ErrorInfo has reason
        SERVICE_DISABLED and names the service, consumer and activation URL (google/api/error_reason.proto,
        cloud.google.com/apis/design/errors; the message as Google writes it)."""
        title = API_TITLES.get(service, service)
        url = f"https://console.developers.google.com/apis/api/{service}/overview?project={self.project_number}"
        body = error(403, "PERMISSION_DENIED",
                     f"{title} has not been used in project {self.project_number} before or it is disabled. Enable it "
                     f"by visiting {url} then retry. If you enabled this API recently, wait a few minutes for the "
                     "action to propagate to our systems and retry.", reason="SERVICE_DISABLED", service=service)
        body["error"]["details"][0]["metadata"].update(consumer=f"projects/{self.project_number}", activationUrl=url)
        return body

    @property
    def endpoint(self) -> str:
        return self.base_url

    def add_deployment(self, deployment: str = "gantry", region: str = "us-central1") -> None:
        """What infra/ creates outside Compute: the runs bucket, the image repository, the nodes' account."""
        labels = {"gantry-deployment": deployment}
        self.buckets.append({"name": f"{self.project}-{deployment}-runs", "location": region.upper(),
                             "labels": labels})
        self.repositories.append({"name": deployment, "location": region, "labels": labels})
        self.accounts.append(f"{deployment}-node@{self.project}.iam.gserviceaccount.com")

    def handle(self, method: str, path: str, query: dict, body: dict) -> tuple[int, dict]:
        for pattern, answer in self.errors.items():
            if re.search(pattern, path):
                return answer
        p = re.escape(self.project)
        served_by = "serviceusage.googleapis.com" if "/services/" in path and path.startswith("/v1/projects/") else (
            "cloudresourcemanager.googleapis.com" if path.endswith(":getEffectiveOrgPolicy") else "")
        if served_by in self.disabled_services:
            return 403, self.service_disabled(served_by)
        match = re.fullmatch(r"/v1/projects/([^/]+)/services/([a-z0-9.-]+)", path)
        if method == "GET" and match and match[1] != self.project:  # Google answers 403 for a project you cannot see
            return 403, error(403, "PERMISSION_DENIED", f"Permission denied to get service [{match[2]}]",
                              reason="AUTH_PERMISSION_DENIED", service="serviceusage.googleapis.com")
        match = re.fullmatch(rf"/v1/projects/{p}/services/([a-z0-9.-]+)", path)
        if method == "GET" and match:
            # services.get: a Service (cloud.google.com/service-usage/docs/reference/rest/v1/Service), named by
            # project number; "state" is ENABLED or DISABLED
            parent = f"projects/{self.project_number}"
            return 200, {"name": f"{parent}/services/{match[1]}", "parent": parent,
                         "config": {"name": match[1], "title": match[1]},
                         "state": "DISABLED" if match[1] in self.disabled_services else "ENABLED"}
        if method == "GET" and path == "/storage/v1/b":
            items = [{"kind": "storage#bucket", "id": b["name"], "storageClass": "STANDARD", **b}
                     for b in self.buckets if query.get("project") == [self.project]]
            return 200, {"kind": "storage#buckets", "items": items}
        match = re.fullmatch(rf"/v1/projects/{p}/locations/([^/]+)/repositories", path)
        if method == "GET" and match:
            items = [{"name": f"projects/{self.project}/locations/{r['location']}/repositories/{r['name']}",
                      "format": "DOCKER", "mode": "STANDARD_REPOSITORY", "labels": r["labels"], "sizeBytes": "2500000000"}
                     for r in self.repositories if r["location"] == match[1]]
            return 200, {"repositories": items} if items else {}
        if method == "GET" and re.fullmatch(rf"/v1/projects/{p}/serviceAccounts", path):
            items = [{"name": f"projects/{self.project}/serviceAccounts/{email}", "projectId": self.project,
                      "email": email, "displayName": "Gantry nodes", "uniqueId": "1000"} for email in self.accounts]
            return 200, {"accounts": items} if items else {}
        if method == "POST" and re.fullmatch(rf"/v1/projects/{p}:getEffectiveOrgPolicy", path):
            constraint = body["constraint"]
            rule = self.policies.get(constraint.removeprefix("constraints/"), {})
            return 200, {"version": 1, "constraint": constraint, "etag": "BwXUWx9Rqss=", **rule}
        match = re.fullmatch(rf"/v2/projects/{p}/locations/([^/]+)/acceleratorTypes/([^/]+)", path)
        if method == "GET" and match:
            zone, tpu_type = match[1], match[2]
            name = f"projects/{self.project}/locations/{zone}/acceleratorTypes/{tpu_type}"
            if tpu_type not in self.tpu_types.get(zone, []):
                return 404, error(404, "NOT_FOUND", f"Resource '{name}' was not found")
            return 200, {"name": name, "type": tpu_type, "acceleratorConfigs": [TPU_CONFIGS[tpu_type]]}
        # nodes.list / queuedResources.list: {"nodes": [...]} or {"queuedResources": [...]}, with nextPageToken and
        # unreachable (ListNodesResponse, ListQueuedResourcesResponse); an empty list is {} in Google's JSON.
        match = re.fullmatch(rf"/v2/projects/{p}/locations/([^/]+)/(nodes|queuedResources)", path)
        if method == "GET" and match:
            zone, kind = match[1], match[2]
            listed = self.tpu_nodes if kind == "nodes" else self.queued_resources
            items = [self._public(item) for item in listed.values() if f"/locations/{zone}/" in item["name"]]
            return 200, {kind: items} if items else {}
        match = re.fullmatch(rf"/v2/projects/{p}/locations/([^/]+)/nodes/([^/:]+)(?::(\w+))?", path)
        if match:
            return self._tpu_node(method, match[1], match[2], match[3] or "", query, body)
        match = re.fullmatch(rf"/v2/(projects/{p}/locations/[^/]+/operations/[^/]+)", path)
        if method == "GET" and match:
            if match[1] not in self.operations:
                return 404, error(404, "NOT_FOUND", f"Resource '{match[1]}' was not found")
            return 200, self.operations[match[1]]
        if method == "GET" and path == f"/v1/projects/{self.project}/locations/global/services/tpu.googleapis.com/quotaInfos":
            return 200, {"quotaInfos": self.quota_infos} if self.quota_infos else {}
        return 404, error(404, "NOT_FOUND", f"no route for {method} {path}")


API_TITLES = {"serviceusage.googleapis.com": "Service Usage API",
              "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API", "tpu.googleapis.com": "Cloud TPU API"}

# AcceleratorConfig of each single-host type (cloud.google.com/tpu/docs/reference/rest/v2/AcceleratorConfig:
# type is the TPU generation enum, topology the chips' arrangement).
TPU_CONFIGS = {
    "v2-8": {"type": "V2", "topology": "2x2"},
    "v3-8": {"type": "V3", "topology": "2x2"},
    "v4-8": {"type": "V4", "topology": "2x2x1"},
    "v5litepod-1": {"type": "V5LITE_POD", "topology": "1x1"},
    "v5litepod-4": {"type": "V5LITE_POD", "topology": "2x2"},
    "v5litepod-8": {"type": "V5LITE_POD", "topology": "2x4"},
}


def error(code: int, status: str, message: str, reason: str = "", service: str = "") -> dict:
    """Google's JSON error body (AIP-193), with an ErrorInfo when ``reason`` is given."""
    body: dict = {"code": code, "message": message, "status": status}
    if reason:
        body["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                            "domain": "googleapis.com", "metadata": {"service": service}}]
    return {"error": body}


class _Handler(StandInHandler):
    fake: FakeGoogleApis

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        self.fake.requests.append(f"{method} {self.path}")
        status, answer = self.fake.handle(method, url.path, parse_qs(url.query), body)
        self.reply_json(status, answer)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")


FakeGoogleApis.handler_class = _Handler
