"""The run's bucket as the agent reads and writes it: a file:// folder (a shared disk, tests) or gs:// through the
Cloud Storage JSON API with the VM's token (the node's service account holds objectAdmin on the runs bucket,
infra/iam.tf). Stdlib only: urllib, no client library."""

from __future__ import annotations

import datetime
import json
import os
import shutil
import urllib.error
import urllib.parse
import urllib.request

from launch_contract import is_partial, partial_name

CHUNK = 1024 * 1024


class StorageError(Exception):
    """A bucket that refused or could not be reached: its message is one line."""


def _split(url: str) -> tuple[str, str, str]:
    """(scheme, bucket or "", object name or local path)."""
    scheme, _, rest = url.partition("://")
    if scheme == "file":
        return scheme, "", urllib.parse.unquote(rest)
    if scheme == "gs":
        bucket, _, name = rest.partition("/")
        return scheme, bucket, name
    raise StorageError(f"cannot copy to or from {url} (gs:// or file://)")


def _open(request: urllib.request.Request, timeout: float):
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:  # Google's error body: {"error": {"code", "message", "errors"}}
        try:
            message = json.loads(exc.read() or b"{}")["error"]["message"]
        except (ValueError, KeyError, TypeError, OSError):
            message = exc.reason
        raise StorageError(f"HTTP {exc.code}: {' '.join(str(message).split())}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise StorageError(str(exc)) from None


def _bucket_url(storage_url: str, bucket: str) -> str:
    return f"{storage_url}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o"


def _epoch(rfc3339: str) -> float:
    """An object's `updated` (RFC 3339, 'Z'): the Python of older images parses no 'Z'."""
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def list_objects(url: str, token, storage_url: str, timeout: float = 60) -> dict[str, tuple[int, float]]:
    """{name below url: (size, epoch seconds of its last write)} of everything under the folder ``url``."""
    scheme, bucket, root = _split(url.rstrip("/"))
    found = {}
    if scheme == "file":
        for folder, _, files in os.walk(root):
            for name in files:
                if not is_partial(name):  # another writer's copy in flight
                    stat = os.stat(os.path.join(folder, name))
                    found[os.path.relpath(os.path.join(folder, name), root)] = (stat.st_size, stat.st_mtime)
        return found
    # objects.list (cloud.google.com/storage/docs/json_api/v1/objects/list): GET /storage/v1/b/BUCKET/o?prefix=P,
    # a page at a time (up to 1,000 items); nextPageToken, when present, asks for the next page as pageToken.
    prefix, page = root + "/", ""
    while True:
        query = {"prefix": prefix, "fields": "items(name,size,updated),nextPageToken"}
        if page:
            query["pageToken"] = page
        request = urllib.request.Request(f"{_bucket_url(storage_url, bucket)}?{urllib.parse.urlencode(query)}",
                                         headers={"Authorization": f"Bearer {token()}"})
        with _open(request, timeout) as response:
            body = json.loads(response.read() or b"{}")
        for item in body.get("items", []):
            if not item["name"].endswith("/") and not is_partial(item["name"]):  # a console folder, a copy in flight
                found[item["name"][len(prefix):]] = (int(item["size"]), _epoch(item["updated"]))
        page = body.get("nextPageToken", "")
        if not page:
            return found


def download(url: str, path: str, token, storage_url: str, timeout: float = 600) -> None:
    """The object at ``url`` into the local ``path``, whole or not at all (a .tmp beside it, then a rename)."""
    scheme, bucket, name = _split(url)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(partial_name(path), "wb") as out:
        if scheme == "file":
            with open(name, "rb") as source:
                shutil.copyfileobj(source, out, CHUNK)
        else:
            # objects.get with alt=media (cloud.google.com/storage/docs/json_api/v1/objects/get): the object's data.
            request = urllib.request.Request(
                f"{_bucket_url(storage_url, bucket)}/{urllib.parse.quote(name, safe='')}?alt=media",
                headers={"Authorization": f"Bearer {token()}"})
            with _open(request, timeout) as response:
                shutil.copyfileobj(response, out, CHUNK)
    os.replace(partial_name(path), path)


def read(url: str, token, storage_url: str, timeout: float = 30) -> bytes | None:
    """A small object's bytes; None when there is no such object (StorageError for anything else)."""
    scheme, bucket, name = _split(url)
    if scheme == "file":
        try:
            with open(name, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
    request = urllib.request.Request(f"{_bucket_url(storage_url, bucket)}/{urllib.parse.quote(name, safe='')}"
                                     "?alt=media", headers={"Authorization": f"Bearer {token()}"})
    try:
        with _open(request, timeout) as response:
            return response.read()
    except StorageError as exc:
        if str(exc).startswith("HTTP 404"):
            return None
        raise


def upload(url: str, data, token, storage_url: str, content_type: str = "application/octet-stream",
           timeout: float = 600) -> None:
    """``data`` (bytes, or the path of a local file) as the object at ``url``, replacing it whole."""
    scheme, bucket, name = _split(url)
    if scheme == "file":  # a plain copy, renamed into place: a reader never sees half a file
        os.makedirs(os.path.dirname(name), exist_ok=True)
        if isinstance(data, bytes):
            with open(partial_name(name), "wb") as out:
                out.write(data)
        else:
            shutil.copyfile(data, partial_name(name))
        os.replace(partial_name(name), name)
        return
    # The simple upload (objects.insert, cloud.google.com/storage/docs/json_api/v1/objects/insert): POST
    # /upload/storage/v1/b/BUCKET/o?uploadType=media&name=OBJECT, the body the object's data, which replaces an
    # object of that name whole (overwriting needs objectAdmin, which the node holds). A file goes as a stream,
    # not read into memory; one cut off is sent again whole at the next turn (a resumable upload would go on).
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    size = len(data) if isinstance(data, bytes) else os.path.getsize(data)
    body = data if isinstance(data, bytes) else open(data, "rb")  # noqa: SIM115 (closed below)
    try:
        request = urllib.request.Request(
            f"{storage_url}/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?{query}", data=body,
            method="POST", headers={"Authorization": f"Bearer {token()}", "Content-Type": content_type,
                                    "Content-Length": str(size)})
        with _open(request, timeout) as response:
            response.read()
    finally:
        if body is not data:
            body.close()


def delete(url: str, token, storage_url: str, timeout: float = 60) -> None:
    """Remove the object at ``url``; one already gone is no error."""
    scheme, bucket, name = _split(url)
    if scheme == "file":
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
        return
    # objects.delete (cloud.google.com/storage/docs/json_api/v1/objects/delete): DELETE /storage/v1/b/BUCKET/o/OBJECT,
    # 204 No Content; 404 when there is no such object (deleted already: what was asked).
    request = urllib.request.Request(f"{_bucket_url(storage_url, bucket)}/{urllib.parse.quote(name, safe='')}",
                                     method="DELETE", headers={"Authorization": f"Bearer {token()}"})
    try:
        with _open(request, timeout) as response:
            response.read()
    except StorageError as error:
        if not str(error).startswith("HTTP 404"):
            raise
