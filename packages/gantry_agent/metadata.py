"""The GCE metadata server (or a fake at GANTRY_METADATA_URL): the run spec in, the report out, the VM's token;
and the token bucket that keeps guest-attribute writes within GCE's rate limit."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request


class TokenBucket:
    """At most ``burst`` writes at once and ``per_minute`` on average."""

    def __init__(self, per_minute: float, burst: int, clock=time.monotonic):
        self.rate, self.capacity, self.clock = per_minute / 60.0, float(burst), clock
        self.tokens, self.updated = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class MetadataError(Exception):
    pass


class Metadata:
    """The GCE metadata server (or a fake at GANTRY_METADATA_URL)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def _request(self, path, method="GET", data=None, timeout=10.0):
        request = urllib.request.Request(f"{self.url}/{path}", data=data, method=method,
                                         headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.read().decode(), response.headers.get("ETag", "")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise MetadataError(f"{method} {path}: {exc}") from exc

    def wait_attributes(self, etag: str, timeout_s: float):
        """All instance attributes, once they differ from ``etag`` or ``timeout_s`` has passed.

        The directory is watched rather than the run key: waiting on a key that does not exist
        yet answers 404 at once, which would turn the wait into a busy loop.
        """
        # Without an ETag, wait_for_change waits for the next change: the first read must not wait.
        query = "?recursive=true"
        if etag:
            query += f"&wait_for_change=true&timeout_sec={max(1, int(timeout_s))}&last_etag={etag}"
        body, new_etag = self._request(f"instance/attributes/{query}", timeout=timeout_s + 10)
        return json.loads(body or "{}"), new_etag

    def token(self) -> str:
        body, _ = self._request("instance/service-accounts/default/token")
        return json.loads(body)["access_token"]

    def get(self, path: str) -> str:
        return self._request(path)[0].strip()

    def put_guest_attribute(self, namespace: str, key: str, value: str) -> None:
        self._request(f"instance/guest-attributes/{namespace}/{key}", method="PUT", data=value.encode())

