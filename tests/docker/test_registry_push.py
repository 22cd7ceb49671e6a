"""Pushing the trainer image to a real registry (Debian's docker-registry on loopback) pins a digest."""

import json
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from gantry import registry
from gantry.errors import GantryError

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _engine():
    try:
        from gantry.images import docker_client
        return docker_client()
    except GantryError as e:
        pytest.skip(f"no Docker engine: {e.line()}")


@pytest.fixture
def local_registry(tmp_path):
    binary = shutil.which("docker-registry")
    if not binary:
        pytest.skip("docker-registry is not installed (scripts/ci-setup.d/20-docker.sh installs it in CI)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "registry.yml"
    config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_push_returns_the_digest_the_registry_serves(local_registry, tmp_path):
    client = _engine()
    base = next((t for img in client.images.list() for t in img.tags if t.startswith("gantry-base:")), None)
    if base is None:
        pytest.skip("no gantry-base image (scripts/docker_base.sh makes it)")
    client.images.get(base).tag("gantry-trainer", "pushtest")
    repository = f"{local_registry}/proj/repo"   # HOST/PROJECT/REPO, as Artifact Registry's URL
    lines = []
    pinned = registry.push("gantry-trainer:pushtest", repository, "cpu", auth=None, progress=lines.append)
    assert pinned.startswith(f"{repository}/gantry-trainer@sha256:")
    # the registry itself answers the manifest by that digest
    digest = pinned.split("@", 1)[1]
    req = urllib.request.Request(f"http://{local_registry}/v2/proj/repo/gantry-trainer/manifests/{digest}",
                                 headers={"Accept": "application/vnd.docker.distribution.manifest.v2+json"})
    assert urllib.request.urlopen(req, timeout=10).status == 200
    path = registry.record(pinned, use_gpu=False, where=tmp_path)
    assert json.loads(path.read_text())["image"] == pinned
    assert registry.recorded(False, repository, where=tmp_path) == pinned
    assert registry.recorded(False, "other-host/p/r", where=tmp_path) is None  # another deployment's push


def test_a_missing_local_image_says_build_first():
    _engine()
    with pytest.raises(registry.PushError) as err:
        registry.push("gantry-trainer:does-not-exist", "127.0.0.1:1/p/r", "cpu", auth=None)
    assert err.value.line() == "no local image gantry-trainer:does-not-exist (ImageNotFound). Build it first: make build-train."


def test_a_repository_url_without_a_path_is_refused():
    with pytest.raises(registry.PushError) as err:
        registry.registry_host("justahost")
    assert "Run `make apply` first" in err.value.line()
