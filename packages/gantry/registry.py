"""Push the trainer image to the deployment's Artifact Registry repository; runs use its digest.

Authentication is the user's Google credentials (Application Default Credentials): an OAuth
access token is a valid registry password for the user ``oauth2accesstoken``, so no
``gcloud auth configure-docker`` and no stored password is needed. The pushed digest is
recorded in ``.gantry/image-<use>.json`` so ``gantry run`` pins ``repo/gantry-trainer@sha256:…``
instead of a tag that may move.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from gantry.errors import GantryError

REPO_ROOT = Path(__file__).resolve().parents[2]
PUSHED = REPO_ROOT / ".gantry"
IMAGE_NAME = "gantry-trainer"


class PushError(GantryError):
    pass


def registry_host(repository_url: str) -> str:
    """'us-central1-docker.pkg.dev/proj/repo' -> 'us-central1-docker.pkg.dev'."""
    host = repository_url.split("/", 1)[0]
    if not host or "/" not in repository_url:
        raise PushError(f"image repository {repository_url!r} is not HOST/PROJECT/REPO",
                        "Run `make apply` first: its output image_repository_url names the repository.")
    return host


def google_registry_auth() -> dict:
    """Docker auth_config from Application Default Credentials (a short-lived access token)."""
    from google.auth.transport.requests import Request

    from gantry.gcp import find_credentials

    credentials, _ = find_credentials()
    credentials.refresh(Request())
    return {"username": "oauth2accesstoken", "password": credentials.token}


def push(local_image: str, repository_url: str, tag: str, auth: dict | None,
         progress: Callable[[str], None] = print) -> str:
    """Tag and push; return the pinned reference ``REPO/gantry-trainer@sha256:…``."""
    from gantry.images import docker_client

    registry_host(repository_url)
    client = docker_client()
    target = f"{repository_url}/{IMAGE_NAME}"
    try:
        client.images.get(local_image).tag(target, tag)
    except Exception as e:  # docker.errors.ImageNotFound and friends
        raise PushError(f"no local image {local_image} ({type(e).__name__})",
                        "Build it first: make build-train.") from None
    digest = ""
    last = ""
    for event in client.api.push(target, tag=tag, stream=True, decode=True, auth_config=auth):
        if "error" in event:
            detail = event.get("errorDetail", {}).get("message") or event["error"]
            fix = ("Check `gcloud auth application-default login` and that your account may write to the "
                   "repository (roles/artifactregistry.writer)." if "denied" in detail or "unauthorized" in detail
                   else "See the message above; `make apply` creates the repository.")
            raise PushError(f"pushing {target}:{tag} failed: {detail}", fix)
        digest = event.get("aux", {}).get("Digest", digest)
        status = " ".join(str(event.get(k, "")) for k in ("id", "status") if event.get(k))
        if status and status != last:
            progress(status)
            last = status
    if not digest:
        raise PushError(f"the registry accepted {target}:{tag} but reported no digest", "Push again.")
    pinned = f"{target}@{digest}"
    progress(f"pushed {pinned}")
    return pinned


def record(pinned: str, use_gpu: bool, where: Path = PUSHED) -> Path:
    where.mkdir(exist_ok=True)
    path = where / f"image-{'cuda' if use_gpu else 'cpu'}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"image": pinned}) + "\n")
    os.replace(tmp, path)
    return path


def recorded(use_gpu: bool, repository_url: str, where: Path = PUSHED) -> str | None:
    """The digest-pinned image of the last push to this repository, if any."""
    path = where / f"image-{'cuda' if use_gpu else 'cpu'}.json"
    try:
        image = json.loads(path.read_text())["image"]
    except (OSError, ValueError, KeyError):
        return None
    return image if image.startswith(f"{repository_url}/") else None


def main(argv: list[str] | None = None) -> int:
    """`python -m gantry.registry [--gpu]`: push the locally built image to the repository from terraform."""
    import argparse
    import sys

    from gantry.images import use_gpu_from_tfvars
    from gantry.terraform import Terraform

    ap = argparse.ArgumentParser(prog="gantry.registry", description="push the trainer image (make build-train)")
    ap.add_argument("--gpu", action="store_true", default=None, help="the CUDA image (default: use_gpu in tfvars)")
    ap.add_argument("--repository", default="", help="default: terraform output image_repository_url")
    args = ap.parse_args(argv)
    use_gpu = use_gpu_from_tfvars() if args.gpu is None else args.gpu
    try:
        repository = args.repository or str(Terraform(REPO_ROOT / "infra").outputs().get("image_repository_url", ""))
        if not repository:
            raise PushError("no image repository: Terraform has no output image_repository_url",
                            "Run `make apply` first.")
        tag = "cuda" if use_gpu else "cpu"
        auth = None if os.environ.get("GANTRY_REGISTRY_NO_AUTH") else google_registry_auth()
        pinned = push(f"{IMAGE_NAME}:{tag}", repository, tag, auth)
        print(f"recorded in {record(pinned, use_gpu)}; `make run-gcp` will use it")
    except GantryError as e:
        print(f"gantry: error: {e.line()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
