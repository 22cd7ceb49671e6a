"""The registry lookup `gantry run` makes before touching a node, against a server in Artifact Registry's
shape (the distribution API with its bearer-token handshake), and the push's own refusals."""

import pytest
from fake_registry import FakeRegistry
from gantry.gcp import registry


def test_lookup_follows_the_bearer_token_handshake_and_pins_the_digest():
    with FakeRegistry(token="user-token") as server:
        digest = server.add("p/r/gantry-trainer", "cpu")
        image = f"{server.host}/p/r/gantry-trainer:cpu"
        assert registry.pinned(image, password=lambda: "user-token") == f"{server.host}/p/r/gantry-trainer@{digest}"
        assert registry.manifest_digest(f"{server.host}/p/r/gantry-trainer@{digest}", lambda: "user-token") == digest
        assert registry.manifest_digest(f"{server.host}/p/r/gantry-trainer:cuda", lambda: "user-token") is None
        with pytest.raises(registry.RegistryError, match="refused your credentials"):
            registry.manifest_digest(image, password=lambda: "someone-elses")


def test_an_unreachable_registry_is_one_line():
    with FakeRegistry() as server:
        host = server.host
    with pytest.raises(registry.RegistryError, match=f"cannot reach the registry at {host}"):
        registry.manifest_digest(f"{host}/p/r/gantry-trainer:cpu")


def test_references_without_a_registry_host_are_refused():
    assert registry.split_reference("h.example/p/r/img@sha256:ab") == ("h.example", "p/r/img", "sha256:ab")
    assert registry.split_reference("127.0.0.1:5000/p/img") == ("127.0.0.1:5000", "p/img", "latest")
    with pytest.raises(registry.RegistryError, match="names no registry host"):
        registry.split_reference("gantry-trainer:cpu")


@pytest.mark.docker
def test_pushing_a_missing_local_image_says_build_first():
    from gantry.errors import GantryError

    try:
        from gantry.images import docker_client
        docker_client()
    except GantryError as e:
        pytest.skip(f"no Docker engine: {e.line()}")
    with pytest.raises(registry.RegistryError) as err:
        registry.push("gantry-trainer:does-not-exist", "127.0.0.1:1/p/r/gantry-trainer", "cpu", auth=None)
    assert err.value.line() == "no local image gantry-trainer:does-not-exist. Build it first: make build-train."
