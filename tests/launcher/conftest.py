"""Fixtures for the launcher tests: the fake Compute API, a deployment directory with a
tfvars file, the provider-free Terraform module, and a way to run the real CLI."""

from __future__ import annotations

import io

import pytest
from gantry.cli import Environment, main
from launcher_helpers import FIXTURE_MODULE, Deployment, NotATerminal, Result, Terminal
from local_cloud.compute import FakeCompute
from local_cloud.googleapis import FakeGoogleApis

# Transient errors are retried after milliseconds, not the real seconds (gantry.gcp.RETRY_ENV).
SHORT_RETRY = {"GANTRY_RETRY_INITIAL_S": "0.01", "GANTRY_RETRY_MAXIMUM_S": "0.05", "GANTRY_RETRY_DEADLINE_S": "20"}


@pytest.fixture(autouse=True)
def offline_terraform(monkeypatch):
    """No CLI config: the fixture module needs no provider, so Terraform never looks for a mirror."""
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", "/dev/null")


@pytest.fixture
def fake():
    with FakeCompute.us_central1(project="demo-project") as server:
        yield server


@pytest.fixture
def apis():
    """Storage, Artifact Registry, IAM and Resource Manager (org policies) over REST."""
    with FakeGoogleApis(project="demo-project") as server:
        yield server


@pytest.fixture
def deployment(tmp_path) -> Deployment:
    return Deployment(tmp_path)


@pytest.fixture
def tf_deployment(tmp_path) -> Deployment:
    """A deployment whose infra/ is a copy of the provider-free module."""
    return Deployment(tmp_path, FIXTURE_MODULE)


@pytest.fixture
def cli(fake, apis, deployment, monkeypatch):
    """Run `gantry <argv>` in-process against the fake API, in the deployment directory."""

    def run(*argv: str, answer: str | None = None, environ: dict | None = None) -> Result:
        out, err = io.StringIO(), io.StringIO()
        stdin = Terminal(answer) if answer is not None else NotATerminal("")
        endpoints = {"GANTRY_COMPUTE_ENDPOINT": fake.endpoint, "GANTRY_GOOGLEAPIS_ENDPOINT": apis.endpoint}
        env = Environment(stdout=out, stderr=err, stdin=stdin, environ={**endpoints, **SHORT_RETRY, **(environ or {})})
        monkeypatch.chdir(deployment.root)
        status = main(list(argv), env)
        return Result(status, out.getvalue(), err.getvalue())

    return run


# ---- the agent's process tests (test_agent.py, test_agent_command.py) ----
@pytest.fixture
def metadata():
    """A metadata server (FakeMetadata) for the agent processes a test starts."""
    from local_cloud.metadata import FakeMetadata

    with FakeMetadata() as server:
        yield server


@pytest.fixture
def nodes():
    """The agent processes a test starts (agent_helpers.Node): stopped, their containers killed, at its end."""
    started = []
    yield started
    for node in started:
        node.stop(timeout=60)
        node.kill_containers()


@pytest.fixture
def registry():
    """The registry's distribution API with its token handshake (FakeRegistry), for the run verbs' image lookup."""
    from fake_registry import FakeRegistry

    with FakeRegistry() as server:
        yield server
