"""The run verbs on a Cloud TPU VM, through the Cloud TPU API v2 over REST (gantry.launches.NodeApi).

A TPU VM is not a Compute instance of the user's project: Cloud TPU manages it as a node,
https://tpu.googleapis.com/v2/projects/P/locations/ZONE/nodes/NAME. What each verb uses, from Google's REST
reference (cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes):

- nodes.get: ``state`` (READY when up; CREATING, STARTING, RESTARTING, REPAIRING, ... on the way; STOPPED after
  nodes:stop; PREEMPTED once Cloud TPU took a Spot TPU back), ``metadata`` (a plain string map: there is no
  fingerprint, so the last writer wins), ``schedulingConfig`` {preemptible, spot}.
- nodes.patch ``?updateMask=metadata`` with the whole map (every other key kept: the agent and the startup script
  live there), nodes:start and nodes:stop: each answers a long-running Operation, polled with operations.get until
  ``done`` (google.longrunning.Operation: ``error`` is a google.rpc.Status).
- nodes:getGuestAttributes {"queryPath": "gantry/"}: {"guestAttributes": [{"queryPath", "queryValue": {"items":
  [{"namespace", "key", "value"}]}, "workerId"}]}, one entry per worker; a single-host TPU VM has worker 0 only.

There is no serial port API for TPU VMs: the node agent uploads the trainer's output to the run's bucket folder
(launch_contract.console_log_url, every few seconds) and ``output`` reads it from there with fsspec.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from launch_contract import REPORT_KEY, Report, RunSpec, console_log_url

from gantry.errors import GantryError
from gantry.gcp import GoogleApis
from gantry.launches import (
    DELETED,
    FRESH,
    STOPPED_STATES,
    TPU_PREEMPTED,
    Cluster,
    Node,
    NodeStatus,
    nodes_deleted,
    tpu_preempted,
    wait_until_up,
)

SERVICE = "tpu"
READY = "READY"
CLOUD_TPU = "Cloud TPU"  # who deleted a node that is gone (runs.nodes_deleted)


@dataclass
class TpuNodes:
    apis: GoogleApis
    cluster: Cluster
    operation_poll_s: float = 2.0
    operation_timeout_s: float = 900.0  # nodes:start of a v3-8 takes minutes

    def path(self, node: Node) -> str:
        return f"v2/projects/{self.cluster.project}/locations/{node.zone}/nodes/{node.name}"

    def get(self, node: Node) -> dict:
        from google.api_core.exceptions import NotFound

        try:
            return self.apis.call("GET", SERVICE, self.path(node))
        except NotFound:
            raise nodes_deleted([node], CLOUD_TPU) from None

    def wait(self, operation: dict, what: str) -> dict:
        """Poll a long-running Operation until done; its ``error`` becomes one line."""
        deadline = time.monotonic() + self.operation_timeout_s
        while not operation.get("done"):
            if time.monotonic() > deadline:
                raise GantryError(f"{what} did not finish in {self.operation_timeout_s:.0f} s",
                                  f"See `gcloud compute tpus operations describe {operation.get('name', '')}`.")
            time.sleep(self.operation_poll_s)
            operation = self.apis.call("GET", SERVICE, f"v2/{operation['name']}")
        if operation.get("error"):
            error = operation["error"]
            raise GantryError(f"{what} failed: {error.get('message', error)}",
                              "See the node in the console (Compute Engine > TPUs) or `gcloud compute tpus tpu-vm "
                              "describe`, then try again.")
        return operation

    def read_spec(self, node: Node) -> RunSpec | None:
        return self._spec_of(self.get(node))

    def _spec_of(self, found: dict) -> RunSpec | None:
        raw = (found.get("metadata") or {}).get(self.cluster.run_key)
        try:
            return RunSpec.from_json(raw) if raw else None
        except ValueError:
            return None  # not a spec this launcher wrote: the agent ignores it too

    def write_spec(self, node: Node, spec: RunSpec) -> None:
        """nodes.patch of the whole metadata map with the spec in it: the mask replaces the map, so every other key
        is sent back as read. No fingerprint guards it; the launcher is the map's only writer after `make apply`."""
        metadata = dict(self.get(node).get("metadata") or {})
        metadata[self.cluster.run_key] = spec.to_json()
        operation = self.apis.call("PATCH", SERVICE, self.path(node), body={"metadata": metadata},
                                   params={"updateMask": "metadata"})
        self.wait(operation, f"writing the run spec into TPU node {node.name}")

    def node_status(self, node: Node) -> NodeStatus:
        from google.api_core.exceptions import NotFound

        try:
            found = self.apis.call("GET", SERVICE, self.path(node))
        except NotFound:
            return NodeStatus(node, DELETED, "", Report(), up_state=READY)
        state = str(found.get("state") or "STATE_UNSPECIFIED")
        scheduling = found.get("schedulingConfig") or {}
        spot = bool(scheduling.get("spot") or scheduling.get("preemptible"))
        attributes: dict[str, str] = {}
        if state == READY:
            try:
                answer = self.apis.call("POST", SERVICE, f"{self.path(node)}:getGuestAttributes",
                                        body={"queryPath": f"{self.cluster.namespace}/"})
            except NotFound:
                answer = {}  # nothing written yet: the VM is still booting
            for worker in answer.get("guestAttributes", []):
                if str(worker.get("workerId") or "0") == "0":  # the agent runs on worker 0
                    attributes = {item.get("key", ""): item.get("value", "")
                                  for item in (worker.get("queryValue") or {}).get("items", [])}
        report = Report.from_json(attributes.get(REPORT_KEY, ""))
        return NodeStatus(node, state, attributes.get("boot", ""), report, spot, self._spec_of(found), up_state=READY)

    def start(self, node: Node) -> None:
        state = self.get(node).get("state")
        if state == TPU_PREEMPTED:
            raise tpu_preempted([node])
        self.wait(self.apis.call("POST", SERVICE, f"{self.path(node)}:start", body={}),
                  f"starting TPU node {node.name}")

    def power_down(self, node: Node) -> bool:
        """nodes:stop: a TPU VM bills until Cloud TPU stops or deletes it, whatever its host does."""
        if self.get(node).get("state") in (*STOPPED_STATES, TPU_PREEMPTED):
            return False
        self.wait(self.apis.call("POST", SERVICE, f"{self.path(node)}:stop", body={}),
                  f"stopping TPU node {node.name}")
        return True

    def power_off(self, node: Node) -> bool:
        return self.power_down(node)  # a TPU node is always stopped through the API

    def ensure_running(self, say: Callable[[str], None], timeout_s: float = 900, poll_s: float = 5) -> None:
        """Start a stopped TPU node (nodes:start) and wait until READY; a preempted one can only be recreated."""
        waiting = []
        for node in self.cluster.nodes:
            state = self.get(node).get("state")
            if state == TPU_PREEMPTED:
                raise tpu_preempted([node])
            if state in STOPPED_STATES:
                say(f"node {node.rank} {node.name} is {state}: starting it")
                self.start(node)
                waiting.append(node)
            elif state != READY:
                waiting.append(node)
        wait_until_up(waiting, lambda n: self.get(n).get("state"), READY, timeout_s, poll_s, "TPU node(s)",
                      "See `gcloud compute tpus tpu-vm describe` for its state and health, then `make run-gcp` again.")

    def output(self, node: Node, start: int = 0) -> tuple[str, int]:
        """The run's output on this node from byte ``start``, read from the log the agent keeps in the run's folder;
        a log shorter than ``start`` was trimmed by the agent (or belongs to a new run) and is read from its top."""
        import fsspec

        spec = self.read_spec(node)
        if spec is None or not spec.run_dir:
            return "", start
        try:
            with fsspec.open(console_log_url(spec.run_dir, node.rank), "rb", **FRESH) as log:
                data = log.read()
        except (FileNotFoundError, OSError):
            return "", start  # nothing uploaded yet
        if len(data) < start:
            start = 0
        return data[start:].decode("utf-8", "replace"), len(data)
