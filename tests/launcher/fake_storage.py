"""A stand-in for the Cloud Storage JSON API calls gantry makes: objects.list (GET /storage/v1/b/{bucket}/o:
`gantry destroy --delete-data`, and the trainer's check of a gs:// run dir), objects.delete (DELETE
.../o/{object}) and the simple upload (POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=...: a TPU VM
agent's ConsoleLog). Missing buckets and denied callers get Google's real error bodies."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from loopback import LoopbackServer


class FakeStorage(LoopbackServer):
    def __init__(self, buckets: dict[str, list[str]] | None = None, forbidden: set[str] | None = None):
        self.buckets = buckets or {}  # bucket -> object names
        self.forbidden = forbidden or set()  # buckets whose objects the caller may not list or write
        self.objects: dict[tuple[str, str], bytes] = {}  # (bucket, name) -> what an upload wrote
        self.tokens: list[str] = []  # the Authorization header of each upload

    @property
    def endpoint(self) -> str:
        return self.base_url


class _Handler(BaseHTTPRequestHandler):
    fake: FakeStorage

    def _reply(self, status: int, body: dict | None = None) -> None:
        payload = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _parts(self) -> list[str]:
        return [unquote(p) for p in urlsplit(self.path).path.split("/") if p]

    def do_GET(self) -> None:
        parts = self._parts()  # storage v1 b BUCKET o
        if len(parts) == 5 and parts[3] in self.fake.forbidden:
            return self._reply(403, _google_error(
                403, "forbidden", "anonymous caller does not have storage.objects.list access to the Google Cloud "
                                  "Storage bucket. Permission 'storage.objects.list' denied on resource (or it may "
                                  "not exist)."))
        if len(parts) == 5 and parts[:2] == ["storage", "v1"] and parts[4] == "o" and parts[3] in self.fake.buckets:
            items = [{"kind": "storage#object", "name": n, "bucket": parts[3]} for n in self.fake.buckets[parts[3]]]
            return self._reply(200, {"kind": "storage#objects", "items": items})
        self._reply(404, _google_error(404, "notFound", "The specified bucket does not exist."))

    def do_POST(self) -> None:
        parts, query = self._parts(), parse_qs(urlsplit(self.path).query)  # upload storage v1 b BUCKET o
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if len(parts) != 6 or parts[:3] != ["upload", "storage", "v1"] or query.get("uploadType") != ["media"]:
            return self._reply(400, _google_error(400, "invalid", "Upload requests must include an uploadType."))
        bucket, name = parts[4], query.get("name", [""])[0]
        self.fake.tokens.append(self.headers.get("Authorization", ""))
        if bucket in self.fake.forbidden:
            return self._reply(403, _google_error(403, "forbidden", f"gantry-node@p.iam.gserviceaccount.com does not "
                                                  f"have storage.objects.create access to the Google Cloud Storage "
                                                  f"object {bucket}/{name}."))
        if bucket not in self.fake.buckets:
            return self._reply(404, _google_error(404, "notFound", "The specified bucket does not exist."))
        self.fake.objects[(bucket, name)] = body
        if name not in self.fake.buckets[bucket]:
            self.fake.buckets[bucket].append(name)
        self._reply(200, {"kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(body))})

    def do_DELETE(self) -> None:
        parts = self._parts()  # storage v1 b BUCKET o OBJECT...
        if len(parts) >= 6 and parts[3] in self.fake.buckets:
            name = "/".join(parts[5:])
            if name in self.fake.buckets[parts[3]]:
                self.fake.buckets[parts[3]].remove(name)
                return self._reply(204)
        self._reply(404, {"error": {"code": 404, "message": "No such object."}})

    def log_message(self, format, *args) -> None:
        pass


def _google_error(code: int, reason: str, message: str) -> dict:
    return {"error": {"code": code, "message": message,
                      "errors": [{"message": message, "domain": "global", "reason": reason}]}}


FakeStorage.handler_class = _Handler
