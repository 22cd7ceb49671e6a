"""The run verbs on C4/N1 VMs, through the Compute Engine API (gantry.launches.NodeApi).

The run spec goes in with instances.setMetadata, guarded by the metadata fingerprint; the agent's report
comes back through getGuestAttributes, and the trainer's output through serial port 2 (getSerialPortOutput),
which the agent writes at /dev/ttyS1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from launch_contract import REPORT_KEY, Report, RunSpec

from gantry.gcp import Compute
from gantry.launches import DELETED, STOPPED_STATES, Cluster, Node, NodeStatus, nodes_deleted, wait_until_up

SERIAL_PORT = 2  # the agent writes the trainer's output to /dev/ttyS1 = port 2


@dataclass
class ComputeNodes:
    compute: Compute
    cluster: Cluster

    def instance(self, node: Node):
        from google.api_core.exceptions import NotFound

        try:
            return self.compute.instances.get(project=self.cluster.project, zone=node.zone, instance=node.name)
        except NotFound:
            raise nodes_deleted([node]) from None

    def ensure_running(self, say: Callable[[str], None], timeout_s: float = 600, poll_s: float = 5) -> None:
        """Start stopped nodes (idle shutdown, Spot preemption, max_run_hours STOP) and wait until RUNNING."""
        compute, cluster = self.compute, self.cluster
        waiting = []
        for node in cluster.nodes:
            status = self.instance(node).status
            if status in STOPPED_STATES:
                say(f"node {node.rank} {node.name} is {status}: starting it")
                compute.wait(compute.instances.start(project=cluster.project, zone=node.zone, instance=node.name))
                waiting.append(node)
            elif status != "RUNNING":
                waiting.append(node)
        wait_until_up(waiting, lambda n: self.instance(n).status, "RUNNING", timeout_s, poll_s, "node(s)",
                      "See `gcloud compute instances describe` for the cause (a Spot stock-out?), then `make run-gcp` "
                      "again.")

    def start(self, node: Node) -> None:
        self.compute.instances.start(project=self.cluster.project, zone=node.zone, instance=node.name).result()

    def power_down(self, node: Node) -> bool:
        return False  # a VM's agent powers it off after idle_shutdown_minutes; a stopped VM bills only its disk

    def power_off(self, node: Node) -> bool:
        if self.node_status(node).vm != "RUNNING":
            return False
        self.compute.instances.stop(project=self.cluster.project, zone=node.zone, instance=node.name).result()
        return True

    def read_spec(self, node: Node) -> RunSpec | None:
        return _spec_of(self.instance(node), self.cluster)

    def write_spec(self, node: Node, spec: RunSpec) -> None:
        """instances.setMetadata with the current fingerprint, keeping every other key (the agent, the
        startup script); a concurrent change (412 conditionNotMet) means read again and retry."""
        from google.cloud import compute_v1

        compute, cluster = self.compute, self.cluster

        def read_modify_write() -> None:
            metadata = self.instance(node).metadata
            items = [compute_v1.Items(key=i.key, value=i.value) for i in metadata.items if i.key != cluster.run_key]
            items.append(compute_v1.Items(key=cluster.run_key, value=spec.to_json()))
            body = compute_v1.Metadata(fingerprint=metadata.fingerprint, items=items)
            compute.wait(compute.instances.set_metadata(project=cluster.project, zone=node.zone, instance=node.name,
                                                        metadata_resource=body))

        compute.retry_fingerprint(read_modify_write)()

    def node_status(self, node: Node) -> NodeStatus:
        from google.api_core.exceptions import NotFound

        compute, cluster = self.compute, self.cluster
        try:
            found = compute.instances.get(project=cluster.project, zone=node.zone, instance=node.name)
        except NotFound:
            return NodeStatus(node, DELETED, "", Report())
        vm = found.status
        spot = found.scheduling.provisioning_model == "SPOT" or bool(found.scheduling.preemptible)
        attributes: dict[str, str] = {}
        if vm == "RUNNING":
            try:
                answer = compute.instances.get_guest_attributes(request={
                    "project": cluster.project, "zone": node.zone, "instance": node.name,
                    "query_path": f"{cluster.namespace}/"})
                attributes = {item.key: item.value for item in answer.query_value.items}
            except NotFound:
                pass  # nothing written yet: the node is still booting
        report = Report.from_json(attributes.get(REPORT_KEY, ""))
        return NodeStatus(node, vm, attributes.get("boot", ""), report, spot, _spec_of(found, cluster),
                          up_since=_epoch(found.last_start_timestamp))

    def output(self, node: Node, start: int = 0) -> tuple[str, int]:
        """New serial-port-2 output from byte ``start``; returns (text, the next start)."""
        from google.api_core.exceptions import NotFound

        try:
            answer = self.compute.instances.get_serial_port_output(request={
                "project": self.cluster.project, "zone": node.zone, "instance": node.name, "port": SERIAL_PORT,
                "start": start})
        except NotFound:
            raise nodes_deleted([node]) from None
        return answer.contents, int(answer.next_)


def _spec_of(vm, cluster: Cluster) -> RunSpec | None:
    for item in vm.metadata.items:
        if item.key == cluster.run_key:
            try:
                return RunSpec.from_json(item.value)
            except ValueError:
                return None  # not a spec this launcher wrote: the agent ignores it too
    return None


def _epoch(timestamp: str) -> float | None:
    """Compute's RFC 3339 timestamps (2026-11-26T06:00:00.123-08:00) as epoch seconds; None when absent."""
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() if timestamp else None
    except ValueError:
        return None
