"""A stand-in for the Google REST APIs the launcher calls without a client library, on one port
(``GANTRY_GOOGLEAPIS_ENDPOINT`` replaces https://SERVICE.googleapis.com; the paths do not collide):

    storage.buckets.list                   GET  /storage/v1/b?project=P
    artifactregistry repositories.list     GET  /v1/projects/P/locations/L/repositories
    iam serviceAccounts.list               GET  /v1/projects/P/serviceAccounts
    cloudresourcemanager (v1)              POST /v1/projects/P:getEffectiveOrgPolicy {"constraint": ...}
      projects.getEffectiveOrgPolicy
    tpu (v2) acceleratorTypes.get          GET  /v2/projects/P/locations/ZONE/acceleratorTypes/TYPE

Answers and errors follow each API's public JSON shapes; ``errors`` maps a path regex to
(status, Google's error body) answered before any route.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from loopback import LoopbackServer


@dataclass
class FakeGoogleApis(LoopbackServer):
    project: str = "demo-project"
    buckets: list[dict] = field(default_factory=list)  # {"name", "location", "labels"}
    repositories: list[dict] = field(default_factory=list)  # {"name": short, "location", "labels"}
    accounts: list[str] = field(default_factory=list)  # emails
    # constraint (without "constraints/") -> the Policy body's rule, e.g. {"booleanPolicy": {"enforced": True}}
    policies: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, tuple[int, dict]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    # zone -> the TPU types the Cloud TPU API lists there (a few of Google's, as in infra/tpu_zones.json)
    tpu_types: dict[str, list[str]] = field(default_factory=lambda: {
        "us-central1-a": ["v3-8", "v5litepod-1", "v5litepod-4", "v5litepod-8"],
        "us-central1-b": ["v2-8", "v3-8"],
        "us-central2-b": ["v4-8"],
    })

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
        return 404, error(404, "NOT_FOUND", f"no route for {method} {path}")


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


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGoogleApis

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}") if length else {}
        self.fake.requests.append(f"{method} {self.path}")
        status, answer = self.fake.handle(method, url.path, parse_qs(url.query), body)
        payload = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format, *args) -> None:
        pass


FakeGoogleApis.handler_class = _Handler
