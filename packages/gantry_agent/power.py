"""Stopping this node's bill: a VM powers its host off; a Cloud TPU VM stops its own node through the Cloud TPU
API (powering a TPU VM's host off does not stop the node's billing). Agent.power_off decides when; these act."""

from __future__ import annotations

import http.client
import json
import subprocess
import time
import urllib.error
import urllib.request

from .metadata import Metadata, MetadataError
from .settings import TPU_ENV_ATTRIBUTE, TPU_NODE_KEY, TPU_PROJECT_KEY, TPU_STOP_PERMISSION, TPU_ZONE_KEY


class StopFailed(Exception):
    """The node could not be stopped: ``node`` (if known) and one line of ``cause`` naming the fix."""

    def __init__(self, node: str, cause: str):
        super().__init__(cause)
        self.node, self.cause = node, cause


def power_off_host(command: list[str]) -> bool:
    """`systemctl poweroff` (GANTRY_AGENT_POWEROFF): True when the command succeeded."""
    return subprocess.run(command, check=False).returncode == 0


def uptime(uptime_file: str, started: float) -> float:
    """Seconds since the host booted: a stopped TPU node started again gets its whole max_run_hours anew, and a
    restarted agent does not reset the count. ``started`` (monotonic) stands in where the file cannot be read."""
    try:
        with open(uptime_file, encoding="ascii") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return time.monotonic() - started


def stop_tpu_node(tpu_url: str, metadata: Metadata, tpu_env: dict) -> tuple[str, str]:
    """nodes:stop of this TPU VM's own node with the VM's token: (the node, the Operation's name). The Operation is
    not waited for: Cloud TPU shuts this host down. StopFailed, with the fix, on any failure."""
    node = ""
    try:
        node = tpu_node(metadata, tpu_env)
        request = urllib.request.Request(
            f"{tpu_url}/v2/{node}:stop", data=b"{}", method="POST",
            headers={"Authorization": f"Bearer {metadata.token()}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            operation = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:  # before OSError, which it is
        status, message = google_error(exc)
        fix = (f"the node service account needs {TPU_STOP_PERMISSION} (infra/iam.tf grants it when use_tpu: "
               "`make apply`)" if exc.code == 403 else "the Cloud TPU API refused it")
        raise StopFailed(node, f"HTTP {exc.code} {status}: {message}; {fix}") from None
    except (MetadataError, OSError, ValueError, http.client.HTTPException) as exc:  # a half answer is no crash
        raise StopFailed(node, str(exc) or type(exc).__name__) from None
    return node, operation.get("name", "?")


def tpu_node(metadata: Metadata, env: dict) -> str:
    """projects/P/locations/ZONE/nodes/NODE of this TPU VM, from tpu-env, else the metadata server's project and
    zone (the node's name is in tpu-env only)."""
    if not env.get(TPU_NODE_KEY):
        raise ValueError(f"the {TPU_ENV_ATTRIBUTE} attribute names no {TPU_NODE_KEY}")
    project = env.get(TPU_PROJECT_KEY) or metadata.get("project/project-id")
    zone = (env.get(TPU_ZONE_KEY) or metadata.get("instance/zone")).rsplit("/", 1)[-1]  # projects/N/zones/Z
    return f"projects/{project}/locations/{zone}/nodes/{env[TPU_NODE_KEY]}"


def parse_tpu_env(text: str) -> dict:
    """tpu-env's `KEY: 'value'` lines (TPU_ENV_ATTRIBUTE) as a dict of unquoted values."""
    values = {}
    for line in str(text).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    return values


def google_error(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The status and message of Google's JSON error body ({"error": {"code", "message", "status"}}), else the
    HTTP reason."""
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
        return str(error.get("status") or exc.reason), str(error.get("message") or exc.reason)
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return str(exc.reason), str(exc.reason)

