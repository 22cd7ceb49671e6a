"""A small stand-in for the GCE metadata server, for running the node agent for real in tests.

The shapes follow https://cloud.google.com/compute/docs/metadata (v1):

    GET  /computeMetadata/v1/instance/attributes/KEY                 the value as text, or 404
    GET  /computeMetadata/v1/instance/attributes/?recursive=true     every attribute as a JSON object
         ... &wait_for_change=true&last_etag=E&timeout_sec=N         hangs until the ETag differs from E
                                                                     or N seconds pass (then the same body)
    GET  /computeMetadata/v1/instance/service-accounts/default/token {"access_token", "expires_in", ...}
    GET  /computeMetadata/v1/project/project-id                      the project's ID as text
    GET  /computeMetadata/v1/instance/zone                           projects/PROJECT_NUMBER/zones/ZONE as text
    PUT  /computeMetadata/v1/instance/guest-attributes/NS/KEY        stores the body
    GET  /computeMetadata/v1/instance/guest-attributes/NS/KEY        reads it back

Every request needs ``Metadata-Flavor: Google`` (403 otherwise), and every answer carries an ETag.
The state is an instance record shared with FakeCompute when one is given, so that
instances.setMetadata there is what the agent sees here, and the agent's guest attributes are
what instances.getGuestAttributes returns there.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from local_cloud.loopback import LoopbackServer, StandInHandler

ROOT = "/computeMetadata/v1/"
MAX_WAIT_S = 60


class FakeMetadata(LoopbackServer):
    def __init__(self, instance: dict | None = None, project_id: str = "demo-project", zone: str = "us-central1-a"):
        self.instance = instance if instance is not None else {}
        self.project_id, self.zone = project_id, zone
        self.instance.setdefault("metadata", {"fingerprint": "fp-0", "items": []})
        self.instance.setdefault("guestAttributes", {})  # "ns/key" -> value
        self.requests: list[tuple[float, str, str]] = []  # (monotonic time, method, path with query)
        self.fail_status: int | None = None  # answer every request with this status (an outage)
        self.tokens_issued = 0
        self._lock = threading.Lock()

    # ---- the state tests read and change ----
    def attributes(self) -> dict[str, str]:
        return {item["key"]: item["value"] for item in self.instance["metadata"].get("items", [])}

    def set_attribute(self, key: str, value: str | None) -> None:
        with self._lock:
            items = [i for i in self.instance["metadata"].get("items", []) if i["key"] != key]
            if value is not None:
                items.append({"key": key, "value": value})
            self.instance["metadata"]["items"] = items

    @property
    def guest_attributes(self) -> dict[str, str]:
        return self.instance["guestAttributes"]

    def count(self, method: str, path_part: str, since: float = 0.0) -> int:
        return sum(1 for t, m, p in list(self.requests) if m == method and path_part in p and t >= since)

    # ---- running ----
    @property
    def url(self) -> str:
        return f"{self.base_url}/computeMetadata/v1"

    # ---- the API ----
    def _directory(self) -> tuple[str, str]:
        body = json.dumps(self.attributes(), sort_keys=True)
        return body, hashlib.sha256(body.encode()).hexdigest()[:16]

    def get(self, path: str, query: dict[str, list[str]]) -> tuple[int, str, str]:
        if path == "instance/attributes/" and query.get("recursive") == ["true"]:
            body, etag = self._directory()
            if query.get("wait_for_change") == ["true"]:
                last = query.get("last_etag", [etag])[0]
                deadline = time.monotonic() + min(float(query.get("timeout_sec", [MAX_WAIT_S])[0]), MAX_WAIT_S)
                while etag == last and time.monotonic() < deadline:
                    time.sleep(0.05)
                    body, etag = self._directory()
            return 200, body, etag
        if path.startswith("instance/attributes/"):
            value = self.attributes().get(path[len("instance/attributes/"):])
            return (200, value, _etag(value)) if value is not None else (404, "not found", "")
        if path == "instance/service-accounts/default/token":
            self.tokens_issued += 1
            body = json.dumps({"access_token": f"fake-token-{self.tokens_issued}", "expires_in": 3599,
                               "token_type": "Bearer"})
            return 200, body, _etag(body)
        if path == "project/project-id":
            return 200, self.project_id, _etag(self.project_id)
        if path == "instance/zone":  # the project's number, not its ID, as GCE answers it
            value = f"projects/123456789012/zones/{self.zone}"
            return 200, value, _etag(value)
        if path.startswith("instance/guest-attributes/"):
            value = self.guest_attributes.get(path[len("instance/guest-attributes/"):])
            return (200, value, _etag(value)) if value is not None else (404, "not found", "")
        return 404, "not found", ""

    def put(self, path: str, body: str) -> tuple[int, str, str]:
        if path.startswith("instance/guest-attributes/") and path.count("/") == 3:
            self.guest_attributes[path[len("instance/guest-attributes/"):]] = body
            return 200, "", ""
        return 404, "not found", ""


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # An agent killed mid-wait (a "reboot" in tests) drops its connection: not the fake's problem.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _etag(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


class _Handler(StandInHandler):
    fake: FakeMetadata

    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        self.fake.requests.append((time.monotonic(), method, self.path))
        if self.headers.get("Metadata-Flavor") != "Google":
            status, body, etag = 403, "Missing Metadata-Flavor:Google header.", ""
        elif self.fake.fail_status:
            status, body, etag = self.fake.fail_status, "fake outage", ""
        elif not url.path.startswith(ROOT):
            status, body, etag = 404, "not found", ""
        elif method == "PUT":
            length = int(self.headers.get("Content-Length") or 0)
            status, body, etag = self.fake.put(unquote(url.path[len(ROOT):]), self.rfile.read(length).decode())
        else:
            status, body, etag = self.fake.get(unquote(url.path[len(ROOT):]), parse_qs(url.query))
        self.reply(status, body.encode(), "application/text", {"Metadata-Flavor": "Google", **({"ETag": etag} if etag else {})})

    def do_GET(self) -> None:
        self._answer("GET")

    def do_PUT(self) -> None:
        self._answer("PUT")


FakeMetadata.handler_class = _Handler
FakeMetadata.server_class = _Server
