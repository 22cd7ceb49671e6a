"""The deployment's image registry: push the trainer image, and ask the registry what it holds.

Authentication is the user's Google credentials (Application Default Credentials): an OAuth access
token is a valid registry password for the user ``oauth2accesstoken``, so no ``gcloud auth
configure-docker`` and no stored password is needed. Nothing is recorded on the laptop: ``gantry run``
asks the registry for the digest behind ``REPO/gantry-trainer:cpu`` (or ``:cuda``) and pins the nodes
to it, so a run started from any machine launches exactly what ``make build-train`` pushed, and an
image that was never pushed is refused before any node is touched.

The registry protocol is the Docker/OCI distribution API (``HEAD /v2/NAME/manifests/REF``) with its
bearer-token handshake, which Artifact Registry and the reference registry server both speak. A
registry on a loopback address (a local test registry) is spoken to over plain HTTP without
credentials, as the Docker engine itself does.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

from gantry.errors import GantryError

# The manifest kinds a pushed image may have: Docker schema 2 (classic builder) and OCI / manifest lists (buildx).
MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json, "
                  "application/vnd.docker.distribution.manifest.list.v2+json, "
                  "application/vnd.oci.image.manifest.v1+json, application/vnd.oci.image.index.v1+json")
BUILD_FIX = "Run `make build-train` (it builds and pushes to the deployment's repository), or name one with --image."


class RegistryError(GantryError):
    pass


def split_reference(image: str) -> tuple[str, str, str]:
    """'HOST/PATH/NAME:TAG' or 'HOST/PATH/NAME@sha256:…' -> (host, 'PATH/NAME', 'TAG' or 'sha256:…')."""
    host, _, rest = image.partition("/")
    if not rest or "." not in host and ":" not in host and host != "localhost":
        raise RegistryError(f"image {image!r} names no registry host",
                            "Give a full reference such as us-central1-docker.pkg.dev/PROJECT/REPO/gantry-trainer:cpu.")
    if "@" in rest:
        name, _, reference = rest.partition("@")
    else:
        name, _, reference = rest.rpartition(":") if ":" in rest.rsplit("/", 1)[-1] else (rest, "", "latest")
    return host, name, reference


def is_loopback(host: str) -> bool:
    name = host.rsplit(":", 1)[0].strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def google_access_token() -> str:
    """A short-lived OAuth token from Application Default Credentials."""
    from google.auth.transport.requests import Request

    from gantry.gcp import find_credentials

    credentials, _ = find_credentials()
    credentials.refresh(Request())
    return credentials.token


def push_auth(host: str) -> dict | None:
    """docker SDK auth_config for pushing to ``host``: none for a loopback registry."""
    return None if is_loopback(host) else {"username": "oauth2accesstoken", "password": google_access_token()}


def _bearer_token(challenge: str, password: Callable[[], str]) -> str:
    """The distribution spec's token handshake: GET realm?service=…&scope=… with Basic credentials."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if "realm" not in params:
        raise RegistryError(f"the registry asked for {challenge!r}", "Check the repository URL (make apply output).")
    query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
    basic = base64.b64encode(f"oauth2accesstoken:{password()}".encode()).decode()
    request = urllib.request.Request(f"{params['realm']}?{query}", headers={"Authorization": f"Basic {basic}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            body = json.load(answer)
    except urllib.error.HTTPError as e:
        raise RegistryError(f"the registry refused your credentials (HTTP {e.code})",
                            "Run `gcloud auth application-default login`; your account needs "
                            "roles/artifactregistry.reader on the repository.") from None
    return body.get("token") or body.get("access_token", "")


def manifest_digest(image: str, password: Callable[[], str] = google_access_token) -> str | None:
    """The digest the registry serves for ``image`` (tag or digest), or None when it has no such image."""
    host, name, reference = split_reference(image)
    scheme = "http" if is_loopback(host) else "https"
    url = f"{scheme}://{host}/v2/{name}/manifests/{reference}"
    headers = {"Accept": MANIFEST_TYPES}
    for _ in range(2):
        request = urllib.request.Request(url, method="HEAD", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.headers.get("Docker-Content-Digest") or (reference if reference.startswith("sha256:")
                                                                      else None)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            challenge = e.headers.get("WWW-Authenticate", "")
            if e.code == 401 and challenge.lower().startswith("bearer") and "Authorization" not in headers:
                headers["Authorization"] = f"Bearer {_bearer_token(challenge[len('bearer'):].strip(), password)}"
                continue
            raise RegistryError(f"the registry at {host} answered HTTP {e.code} for {name}:{reference}",
                                "Check the repository (make apply output) and your access to it.") from None
        except (urllib.error.URLError, OSError) as e:
            raise RegistryError(f"cannot reach the registry at {host} ({getattr(e, 'reason', e)})",
                                "Check your network; `make apply` creates the repository.") from None
    raise RegistryError(f"the registry at {host} refused the token it issued", "Run the command again.")


def pinned(image: str, password: Callable[[], str] = google_access_token, fix: str = BUILD_FIX) -> str:
    """``image`` pinned to the digest the registry holds; refused with ``fix`` when it holds none."""
    digest = manifest_digest(image, password)
    if digest is None:
        raise RegistryError(f"image {image} is not in the registry", fix)
    host, name, _ = split_reference(image)
    return f"{host}/{name}@{digest}"


def push(local_image: str, target: str, tag: str, auth: dict | None,
         progress: Callable[[str], None] = print) -> str:
    """Tag ``local_image`` as ``target:tag``, push it, and return ``target@sha256:…``."""
    import docker
    from gantry.images import docker_client

    client = docker_client()
    try:
        client.images.get(local_image).tag(target, tag)
    except docker.errors.ImageNotFound:
        raise RegistryError(f"no local image {local_image}", "Build it first: make build-train.") from None
    digest, last = "", ""
    for event in client.api.push(target, tag=tag, stream=True, decode=True, auth_config=auth):
        if "error" in event:
            detail = event.get("errorDetail", {}).get("message") or event["error"]
            fix = ("Check `gcloud auth application-default login` and that your account may write to the "
                   "repository (roles/artifactregistry.writer)." if "denied" in detail or "unauthorized" in detail
                   else "See the message above; `make apply` creates the repository.")
            raise RegistryError(f"pushing {target}:{tag} failed: {detail}", fix)
        digest = event.get("aux", {}).get("Digest", digest)
        status = " ".join(str(event.get(k, "")) for k in ("id", "status") if event.get(k))
        if status and status != last:
            progress(status)
            last = status
    if not digest:
        raise RegistryError(f"the registry accepted {target}:{tag} but reported no digest", "Push again.")
    return f"{target}@{digest}"
