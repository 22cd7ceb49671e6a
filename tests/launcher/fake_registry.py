"""A stand-in for Artifact Registry's Docker endpoint, in the shape of the distribution API it speaks:
``HEAD /v2/NAME/manifests/REF`` answers 200 with ``Docker-Content-Digest`` or 404 with the API's
``MANIFEST_UNKNOWN`` error body, and, with ``token`` set, 401 with a ``WWW-Authenticate: Bearer
realm=…,service=…,scope=…`` challenge until a bearer token from ``GET /v2/token`` (Basic
``oauth2accesstoken:TOKEN``) is presented, as Artifact Registry does."""

from __future__ import annotations

import base64
import hashlib
import json
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from local_cloud.loopback import LoopbackServer


class FakeRegistry(LoopbackServer):
    def __init__(self, token: str = ""):
        self.token = token  # the Google access token it accepts; "" = no authentication (a loopback registry)
        self.manifests: dict[tuple[str, str], str] = {}  # (name, tag or digest) -> digest
        self.requests: list[str] = []

    @property
    def host(self) -> str:
        return self.base_url.removeprefix("http://")

    def add(self, name: str, tag: str) -> str:
        """An image pushed as NAME:TAG; returns its digest."""
        digest = "sha256:" + hashlib.sha256(f"{name}:{tag}".encode()).hexdigest()
        self.manifests[(name, tag)] = self.manifests[(name, digest)] = digest
        return digest


class _Handler(BaseHTTPRequestHandler):
    fake: FakeRegistry

    def _reply(self, status: int, body: dict | None = None, headers: dict | None = None) -> None:
        payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.send_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _authorized(self, scope: str) -> bool:
        if not self.fake.token or self.headers.get("Authorization") == f"Bearer issued-for-{self.fake.token}":
            return True
        challenge = f'Bearer realm="{self.fake.base_url}/v2/token",service="fake-registry",scope="{scope}"'
        self._reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]},
                    {"WWW-Authenticate": challenge})
        return False

    def do_GET(self) -> None:
        self.fake.requests.append(f"GET {self.path}")
        if urlsplit(self.path).path == "/v2/token":
            expected = "Basic " + base64.b64encode(f"oauth2accesstoken:{self.fake.token}".encode()).decode()
            if self.headers.get("Authorization") != expected:
                return self._reply(403, {"errors": [{"code": "DENIED", "message": "Permission denied"}]})
            return self._reply(200, {"token": f"issued-for-{self.fake.token}"})
        return self._reply(404, {"errors": [{"code": "NOT_FOUND", "message": "not found"}]})

    def do_HEAD(self) -> None:
        self.fake.requests.append(f"HEAD {self.path}")
        path = urlsplit(self.path).path
        name, _, reference = path.removeprefix("/v2/").partition("/manifests/")
        if not self._authorized(f"repository:{name}:pull"):
            return
        digest = self.fake.manifests.get((name, reference))
        if digest is None:
            return self._reply(404, {"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]})
        return self._reply(200, headers={"Docker-Content-Digest": digest,
                                         "Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})

    def log_message(self, format, *args) -> None:
        pass


FakeRegistry.handler_class = _Handler
