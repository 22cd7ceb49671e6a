"""Fixtures for the container tests: a real Docker engine, the CPU image built once per session through
gantry.images.build_image, and helpers that run containers and always remove them.

CI starts the engine and makes the base image in scripts/ci-setup.d/20-docker.sh; elsewhere the
engine-dependent tests skip only when no engine answers. GANTRY_TEST_BASE_IMAGE picks the base
(default: gantry-base:bookworm when the engine has it, else the Dockerfile's python:3.11-slim-bookworm).
"""

from __future__ import annotations

import time
import uuid

import pytest
from docker_helpers import LOCAL_BASE, docker
from gantry import images

TEST_TAG = "gantry-trainer:test-cpu"
_measured: dict[str, str] = {}


@pytest.fixture(scope="session")
def docker_client():
    try:
        return images.docker_client()
    except images.ImageBuildError as e:
        pytest.skip(f"no Docker engine: {e.line()}")


def _base_image(client) -> str | None:
    import os

    import docker

    chosen = os.environ.get("GANTRY_TEST_BASE_IMAGE")
    if chosen:
        return chosen
    try:
        client.images.get(LOCAL_BASE)
        return LOCAL_BASE
    except docker.errors.ImageNotFound:
        return None  # the Dockerfile's default, pulled from a registry


@pytest.fixture(scope="session")
def local_base(docker_client) -> str:
    """The base image the images here are built on; skips where none is local (the default is pulled)."""
    base = _base_image(docker_client)
    if base is None:
        pytest.skip(f"no {LOCAL_BASE} (scripts/docker_base.sh makes it)")
    return base


@pytest.fixture(scope="session")
def cpu_image(docker_client) -> str:
    """The CPU image, built from the repository's docker/Dockerfile as CI and `make build-train` do."""
    import docker

    base = _base_image(docker_client)
    try:
        previous = docker_client.images.get(TEST_TAG).id
    except docker.errors.ImageNotFound:
        previous = None
    lines: list[str] = []
    start = time.monotonic()
    built = images.build_image("cpu", TEST_TAG, {"BASE_IMAGE": base} if base else {}, lines.append,
                               wheel_dir=images.default_wheel_dir(), ca_certs=images.default_ca_certs())
    if previous and previous != built:  # the last session's image, now untagged: ~1 GB on vfs
        try:
            docker_client.images.remove(previous)
        except docker.errors.APIError:
            pass  # still used by a container or another tag: leave it
    _measured["build"] = f"{time.monotonic() - start:.0f} s (base {base or 'python:3.11-slim-bookworm'})"
    _measured["size"] = f"{images.image_size_mb(TEST_TAG):.0f} MB"
    return TEST_TAG


def pytest_terminal_summary(terminalreporter):
    if _measured:
        terminalreporter.write_line(f"docker: {TEST_TAG} built in {_measured['build']}, image size {_measured['size']}")


@pytest.fixture
def containers():
    """Start detached containers with ``start(...)``; every one is removed at the end, pass or fail."""
    started: list[str] = []

    def start(image: str, *args: str, env: dict | None = None, volumes: dict | None = None) -> str:
        name = f"gantry-test-{uuid.uuid4().hex[:8]}"
        flags = ["run", "-d", "--name", name, "--init", "--network", "host", "--shm-size", "512m"]
        for key, value in (env or {}).items():
            flags += ["-e", f"{key}={value}"]
        for host, inside in (volumes or {}).items():
            flags += ["-v", f"{host}:{inside}"]
        started.append(name)
        docker(*flags, image, *args, timeout=600)
        return name

    yield start
    for name in started:
        docker("rm", "-f", name, check=False, timeout=120)
