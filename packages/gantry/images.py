"""Builds the trainer's Docker image through the Docker Python SDK, with the build's output streamed.

The deployment picks the image: docker/Dockerfile.tpu when ``use_tpu``, docker/Dockerfile with FLAVOUR=cuda when
``use_gpu``, docker/Dockerfile (FLAVOUR=cpu) otherwise (the default when infra/terraform.tfvars is absent). The build context is the repository
root filtered by .dockerignore, plus two things this module adds to it without touching the tree:
local wheels (docker/wheels/ in the context, tried before any index, so a CPU torch wheel on disk
builds the CPU image offline) and extra CA certificates (docker/certs/, for TLS-intercepting proxies).

Images are built for linux/amd64 whatever the laptop is (the nodes are x86 VMs: an Apple-silicon
laptop must not ship an arm64 image). The CLI verbs `gantry build` (make build-train: build, then
push) and `gantry push` (make push-train) live in gantry/cli/build.py and push.py; the registry side is
gantry/gcp/registry.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from gantry.errors import GantryError

REPO_ROOT = Path(__file__).resolve().parents[2]
# CPU and CUDA are one Dockerfile (its FLAVOUR build arg picks torch); the TPU image installs torch_xla and libtpu
# from a pins file, a different install, so it has its own.
DOCKERFILES = {"cpu": "docker/Dockerfile", "cuda": "docker/Dockerfile", "tpu": "docker/Dockerfile.tpu"}
IMAGE_NAME = "gantry-trainer"
PLATFORM = "linux/amd64"  # what the VMs run
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")  # Debian/Ubuntu's place for locally added CAs
NO_ENGINE_FIX = "Start Docker Desktop or `sudo systemctl start docker` (CI: scripts/ci-setup.d/20-docker.sh)"


class ImageBuildError(GantryError):
    """No engine, a bad input, or a failed build step; the message names it and the fix."""


# ---- names ------------------------------------------------------------------------------------------

def flavour(use_gpu: bool, use_tpu: bool = False) -> str:
    """The image's flavour and tag (locally and in the registry): tpu on a TPU deployment, cuda on a GPU one,
    else cpu."""
    return "tpu" if use_tpu else "cuda" if use_gpu else "cpu"


def local_tag(flavour: str) -> str:
    return f"{IMAGE_NAME}:{flavour}"


def repository_image(repository_url: str, flavour: str) -> str:
    """REPO/gantry-trainer:cpu|cuda|tpu: what `gantry build` pushes and `gantry run` launches by default."""
    return f"{repository_url}/{IMAGE_NAME}:{flavour}"


# ---- inputs ----------------------------------------------------------------------------------------

def flavour_from_tfvars(path: Path = REPO_ROOT / "infra" / "terraform.tfvars", infra_dir: Path | None = None) -> str:
    """The deployment's image flavour (use_tpu, use_gpu); cpu when the file is absent (the default). A file
    that is there must pass the checks every verb applies (config.load)."""
    if not path.is_file():
        return "cpu"
    from gantry import config

    deployment = config.load(path, infra_dir)
    return flavour(deployment.use_gpu, deployment.use_tpu)


def default_wheel_dir() -> Path | None:
    """GANTRY_WHEEL_DIR, else pip's own find-links when it is a local folder (what the host's pip uses)."""
    configured = os.environ.get("GANTRY_WHEEL_DIR") or os.environ.get("PIP_FIND_LINKS")
    if not configured:
        try:
            configured = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                                        check=False, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            configured = ""
    for candidate in configured.split():
        path = Path(candidate.removeprefix("file://"))
        if path.is_dir():
            return path
    return None


def torch_pins(root: Path = REPO_ROOT) -> dict:
    """docker/torch.json: torch's version and the CUDA image's CUDA, the one place they live."""
    return json.loads((root / "docker" / "torch.json").read_text())


def torch_wheel_fits(name: str, flavour: str, pins: dict) -> bool:
    """Whether a local torch wheel is the flavour's: +cpu for the CPU and TPU images (a torch wheel without a local
    label is PyPI's, the CUDA build on Linux); for the CUDA image torch.json's torch, either PyPI's own wheel (the
    pinned CUDA, checked against PyPI by tests/index) or +cuMAJORMINOR of the pinned CUDA."""
    version = name.split("-")[1]
    if flavour != "cuda":
        return "+cpu" in version
    cuda_label = "+cu" + pins["cuda"].replace(".", "")
    return version in (pins["torch"], pins["torch"] + cuda_label)


def select_wheels(wheel_dir: Path | None, flavour: str, pins: dict | None = None) -> list[Path]:
    """The wheels to put in the context; torch builds of another flavour or CUDA stay out (a +cpu torch in the
    CUDA image, a CUDA one in the CPU or TPU image, or a +cu126 one where torch.json says 13.0, would win pip's
    choice and fail the build at its flavour check)."""
    if wheel_dir is None:
        return []
    if not wheel_dir.is_dir():
        raise ImageBuildError(f"wheel folder {wheel_dir} not found", "Pass --wheel-dir a folder of *.whl files.")
    pins = pins or torch_pins()
    return sorted(w for w in wheel_dir.glob("*.whl")
                  if not w.name.startswith("torch-") or torch_wheel_fits(w.name, flavour, pins))


def default_ca_certs() -> list[Path]:
    """Locally added CA certificates of this host (a proxy's CA lives there), plus GANTRY_CA_CERTS."""
    found = sorted(HOST_CA_DIR.rglob("*.crt")) if HOST_CA_DIR.is_dir() else []
    extra = [Path(p) for p in os.environ.get("GANTRY_CA_CERTS", "").split(os.pathsep) if p]
    return found + extra


# ---- the build context -------------------------------------------------------------------------------

def build_context(root: Path, dockerfile: str, wheels: Iterable[Path] = (), ca_certs: Iterable[Path] = ()):
    """An uncompressed tar of ``root`` minus .dockerignore, with the wheels under docker/wheels/ and the
    certificates under docker/certs/ (the Dockerfiles' default WHEEL_DIR and CA_CERTS_DIR)."""
    from docker.utils.build import create_archive

    context = tempfile.NamedTemporaryFile(prefix="gantry-context-", suffix=".tar")  # noqa: SIM115 (returned)
    create_archive(str(root), files=context_paths(root, dockerfile), fileobj=context)
    with tarfile.open(fileobj=context, mode="a") as tar:
        add_wheels_and_certs(tar, wheels, ca_certs)
    context.seek(0)
    return context


def context_paths(root: Path, dockerfile: str) -> list[str]:
    """The paths (files and folders) of ``root`` that its .dockerignore lets into a build context."""
    from docker.utils.build import exclude_paths

    ignore = root / ".dockerignore"
    patterns = [line.strip() for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")] if ignore.is_file() else []
    return sorted(exclude_paths(str(root), patterns, dockerfile=dockerfile))


def add_wheels_and_certs(tar: tarfile.TarFile, wheels: Iterable[Path] = (), ca_certs: Iterable[Path] = ()) -> None:
    """The wheels under docker/wheels/ and the certificates under docker/certs/ of a context being written (the
    same names in every image's context, so the engine's cache shares the torch layer they feed)."""
    for wheel in wheels:
        tar.add(wheel, arcname=f"docker/wheels/{wheel.name}")
    for n, cert in enumerate(check_ca_certs(ca_certs)):
        tar.add(cert, arcname=f"docker/certs/extra-{n}-{cert.stem}.crt")


def check_ca_certs(ca_certs: Iterable[Path]) -> list[Path]:
    """The certificates, each a file; ImageBuildError names the first that is not (gantry build asks before it
    says it builds)."""
    certs = list(ca_certs)
    for cert in certs:
        if not cert.is_file():
            raise ImageBuildError(f"CA certificate {cert} not found", "Pass --ca-cert a PEM file.")
    return certs


# ---- the engine -------------------------------------------------------------------------------------------

def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def image_exists(tag: str) -> bool:
    """Whether the local engine holds ``tag``."""
    import docker

    try:
        docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def docker_client():
    """docker.from_env(), or a one-line error saying that no engine answers and how to start one."""
    try:
        import docker
    except ImportError:
        raise ImageBuildError("the docker Python SDK is not installed",
                              'Install the launcher: pip install -e ".[cloud]" (make install-dev).') from None
    try:
        client = docker.from_env(version="auto", timeout=600)
        client.ping()
    except docker.errors.DockerException as e:
        reason = str(e).split(": ", 1)[-1][:160]
        raise ImageBuildError(f"no Docker engine at {engine_address()} ({reason})", NO_ENGINE_FIX) from None
    return client


def build_image(flavour: str, tag: str, build_args: dict | None = None, progress: Callable[[str], None] = print,
                *, wheel_dir: Path | None = None, ca_certs: Iterable[Path] = (), root: Path = REPO_ROOT,
                network_mode: str | None = "host", nocache: bool = False) -> str:
    """Build the flavour's Dockerfile (DOCKERFILES: cpu, cuda or tpu) as ``tag``; return the image id.

    Each line of the engine's output goes to ``progress``. ``network_mode="host"`` lets RUN steps reach
    the package indexes on engines started without a bridge network (as in CI); None is the engine's
    default network."""
    dockerfile = DOCKERFILES[flavour]
    if not (root / dockerfile).is_file():
        raise ImageBuildError(f"{root / dockerfile} not found", "Run from a Gantry checkout (or pass root=).")
    client = docker_client()
    wheels = select_wheels(wheel_dir, flavour)
    certs = list(ca_certs)
    progress(f"gantry: building {tag} from {dockerfile} ({len(wheels)} local wheel(s), {len(certs)} extra CA "
             f"certificate(s), build args: {', '.join(sorted(build_args or {})) or 'none'})")
    image_id = None
    with build_context(root, dockerfile, wheels, certs) as context:
        stream = client.api.build(fileobj=context, custom_context=True, dockerfile=dockerfile, tag=tag,
                                  buildargs={"FLAVOUR": flavour, **{k: str(v) for k, v in (build_args or {}).items()}},
                                  decode=True, rm=True, forcerm=True, pull=False, nocache=nocache,
                                  network_mode=network_mode, platform=PLATFORM)
        for chunk in stream:
            if "error" in chunk:
                detail = chunk["error"].strip().splitlines()[-1] if chunk["error"].strip() else "unknown error"
                raise ImageBuildError(f"building {tag} from {dockerfile} failed: {detail}", fix_for(detail))
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            for line in chunk.get("stream", "").splitlines():
                if line.strip():
                    progress(line)
                if line.startswith("Successfully built "):
                    image_id = image_id or line.split()[-1]
    image = client.images.get(tag)  # the classic builder does not always send aux; the tag is authoritative
    architecture = f"{image.attrs.get('Os')}/{image.attrs.get('Architecture')}"
    if architecture != PLATFORM:
        raise ImageBuildError(f"{tag} was built for {architecture}, but the nodes run {PLATFORM}",
                              "Enable emulation in Docker Desktop (Settings > General > Use Rosetta / QEMU) "
                              "and build again.")
    return image_id or image.id


def fix_for(detail: str) -> str:
    """The next step for a failed build, from the engine's error line."""
    if any(s in detail for s in ("registry", "pull access denied", "manifest unknown", "not found: manifest")):
        return ("The base image cannot be pulled: on machines with no registry run `make docker-base`, then "
                "`make build-train BASE_IMAGE=gantry-base:bookworm` (or name a mirror's image in BASE_IMAGE)")
    if "certificate" in detail or "SSL" in detail:
        return ("TLS to a package index failed: pass your proxy's CA with --ca-cert FILE "
                "(docs/DOCKER.md, Behind a proxy)")
    return "The build output above names the failing step (docs/DOCKER.md, Troubleshooting)"


def image_size_mb(tag: str) -> float:
    return docker_client().images.get(tag).attrs["Size"] / 1e6
