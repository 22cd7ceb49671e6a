"""A stand-in for the Cloud Storage JSON API calls gantry makes, for what fake-gcs-server (packages/local_cloud/storage.py, the
bucket of most tests) does not give: Google's error bodies, a chosen page size, the token of each call, a count of
uploads. objects.list (GET /storage/v1/b/{bucket}/o: the trainer's check of a gs:// run dir, and the agent's
restore of --sync folders with ?prefix=P, a page of ``page_size`` items at a time and nextPageToken / pageToken),
objects.get with
?alt=media (GET .../o/{object}: the object's data), objects.delete (DELETE .../o/{object}) and the simple upload
(POST /upload/storage/v1/b/{bucket}/o?uploadType=media&name=...: a TPU VM agent's ConsoleLog, the agent's copies
of --sync folders). Missing buckets, missing objects and denied callers get Google's real error bodies
(cloud.google.com/storage/docs/json_api/v1/status-codes). The shapes: cloud.google.com/storage/docs/json_api/v1/
objects/list, /get and /insert."""

from __future__ import annotations

import datetime
import json
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from local_cloud.loopback import LoopbackServer


class FakeStorage(LoopbackServer):
    def __init__(self, buckets: dict[str, list[str]] | None = None, forbidden: set[str] | None = None):
        self.buckets = buckets or {}  # bucket -> object names
        self.forbidden = forbidden or set()  # buckets whose objects the caller may not list or write
        self.objects: dict[tuple[str, str], bytes] = {}  # (bucket, name) -> what an upload wrote
        self.updated: dict[tuple[str, str], float] = {}  # (bucket, name) -> epoch seconds of that upload
        self.tokens: list[str] = []  # the Authorization header of each upload
        self.requests: list[str] = []  # "METHOD path?query" of every request, in order
        self.page_size = 1000  # objects.list's maxResults default (and its maximum)

    def put(self, bucket: str, name: str, data: bytes, updated: float | None = None) -> None:
        """An object as an upload leaves it (a test's setup)."""
        self.objects[(bucket, name)] = data
        self.updated[(bucket, name)] = datetime.datetime.now().timestamp() if updated is None else updated
        if name not in self.buckets.setdefault(bucket, []):
            self.buckets[bucket].append(name)

    def resource(self, bucket: str, name: str) -> dict:
        """The object resource (cloud.google.com/storage/docs/json_api/v1/objects): size is a string, updated RFC 3339."""
        data = self.objects.get((bucket, name), b"")
        updated = datetime.datetime.fromtimestamp(self.updated.get((bucket, name), 0.0), datetime.timezone.utc)
        return {"kind": "storage#object", "name": name, "bucket": bucket, "size": str(len(data)),
                "updated": updated.isoformat(timespec="milliseconds").replace("+00:00", "Z")}

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
        parts, query = self._parts(), parse_qs(urlsplit(self.path).query)  # storage v1 b BUCKET o [OBJECT]
        self.fake.requests.append(f"GET {self.path}")
        if len(parts) in (5, 6) and parts[3] in self.fake.forbidden:
            permission = "storage.objects.list" if len(parts) == 5 else "storage.objects.get"
            return self._reply(403, _google_error(
                403, "forbidden", f"anonymous caller does not have {permission} access to the Google Cloud "
                                  f"Storage bucket. Permission '{permission}' denied on resource (or it may "
                                  "not exist)."))
        if len(parts) == 5 and parts[:2] == ["storage", "v1"] and parts[4] == "o" and parts[3] in self.fake.buckets:
            return self._list(parts[3], query)
        if len(parts) == 6 and parts[:2] == ["storage", "v1"] and parts[4] == "o" and parts[3] in self.fake.buckets:
            bucket, name = parts[3], parts[5]
            if name not in self.fake.buckets[bucket]:
                return self._reply(404, _google_error(404, "notFound", f"No such object: {bucket}/{name}"))
            if query.get("alt") != ["media"]:
                return self._reply(200, self.fake.resource(bucket, name))
            data = self.fake.objects.get((bucket, name), b"")
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return None
        self._reply(404, _google_error(404, "notFound", "The specified bucket does not exist."))

    def _list(self, bucket: str, query: dict) -> None:
        """objects.list: names under ?prefix, in lexicographic order, a page at a time; nextPageToken while more."""
        prefix = query.get("prefix", [""])[0]
        names = sorted(n for n in self.fake.buckets[bucket] if n.startswith(prefix))
        start = int(query.get("pageToken", ["0"])[0])  # opaque to the caller: here, where the next page starts
        size = min(int(query.get("maxResults", [self.fake.page_size])[0]), self.fake.page_size)
        body = {"kind": "storage#objects", "items": [self.fake.resource(bucket, n) for n in names[start:start + size]]}
        if start + size < len(names):
            body["nextPageToken"] = str(start + size)
        if not body["items"]:
            del body["items"]  # Google leaves out an empty list
        self._reply(200, body)

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
        self.fake.requests.append(f"POST {self.path}")
        self.fake.put(bucket, name, body)
        self._reply(200, self.fake.resource(bucket, name))

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
