"""Runs on the nodes: the launcher's side of the node agent (packages/gantry_agent).

A run needs no SSH: the launcher writes a run spec (JSON) into each node's metadata key ``gantry-run``
(every other key kept); the agent on the node waits on the metadata server for it, runs the program's
container, and reports back through the guest attribute ``gantry/agent``. Every read here (status,
logs) goes through Google's APIs, so a laptop that disconnects loses nothing: ``gantry status`` and
``gantry logs`` pick the run up again. Which API depends on the nodes (``NodeApi``, picked by
``gantry.nodes.connect``): Compute Engine for C4/N1 VMs (gantry.gcp.compute_nodes: instances.setMetadata, the serial
port), Cloud TPU for a TPU VM (gantry.gcp.tpu_nodes: nodes.patch, the output in the run's bucket folder).

    cluster, api = nodes.connect("infra", os.environ)
    specs = launch_specs(cluster, run_id, image, program_words, run_url=cluster.run_url(run_id, os.environ))
    for node, spec in zip(cluster.nodes, specs): api.write_spec(node, spec)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from launch_contract import (
    ACTIVE_STATES,
    DEFAULT_SYNC_SECONDS,
    NAMESPACE,
    RUN_KEY,
    EndRecord,
    Report,
    RunSpec,
    ended_url,
    is_partial,
    partial_name,
)
from launch_contract import check_run_id as contract_run_id

from gantry.config import DEFAULT_RUN_MAX_MINUTES
from gantry.errors import GantryError
from gantry.local_world import LOCAL_ENV

BUCKET_URL_ENV = "GANTRY_BUCKET_URL"  # another fsspec URL for the bucket (tests: file:///tmp/bucket)
# fsspec keeps one filesystem per arguments and caches its listings: a process that reads the bucket again (a
# --follow, the node twin) while the nodes write it would see it as it was. Each read here asks the bucket.
FRESH = {"use_listings_cache": False}
# Node states a start brings back: Compute's TERMINATED, STOPPED, SUSPENDED; Cloud TPU's STOPPED (nodes:stop).
STOPPED_STATES = ("TERMINATED", "STOPPED", "SUSPENDED")
DELETED = "DELETED"  # NodeStatus.vm of a node the API no longer has (a get answers 404)
TPU_PREEMPTED = "PREEMPTED"  # a Spot TPU that Cloud TPU took back: it can only be deleted (tpu_preempted)
APPLY_FIX = "Run `make apply` first (terraform output has no nodes in infra/)."
RECREATE_FIX = ("Run `make apply` to create the nodes again, then `make run-gcp ARGS=\"--resume RUN_ID\"`: "
                "the checkpoints are in the bucket.")


@dataclass(frozen=True)
class Node:
    rank: int
    name: str
    zone: str


@dataclass(frozen=True)
class Cluster:
    """What the launcher needs from Terraform's outputs."""

    project: str
    nodes: tuple[Node, ...]
    master_address: str
    repository: str  # REGION-docker.pkg.dev/PROJECT/REPO
    bucket: str
    use_gpu: bool
    run_key: str = RUN_KEY
    namespace: str = NAMESPACE
    use_tpu: bool = False  # a Cloud TPU VM (infra/tpu.tf): the TPU image, run with the TPU's device access
    node_addrs: tuple[str, ...] = ()  # every node's internal IP in rank order, as far as the outputs say

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, object]) -> Cluster:
        names = outputs.get("node_names") or []
        if not names:
            raise GantryError("no deployment found", APPLY_FIX)
        zones = outputs.get("node_zones") or [outputs.get("zone")] * len(names)
        # a state applied before infra/ had node_addresses knows node 0's alone
        addresses = outputs.get("node_addresses") or [outputs["master_address"]]
        return cls(project=str(outputs["project_id"]),
                   nodes=tuple(Node(rank, name, zone) for rank, (name, zone) in enumerate(zip(names, zones))),
                   master_address=str(outputs["master_address"]), node_addrs=tuple(str(a) for a in addresses),
                   repository=str(outputs.get("image_repository_url", "")), bucket=str(outputs.get("bucket", "")),
                   use_gpu=bool(outputs.get("use_gpu", False)), use_tpu=bool(outputs.get("use_tpu", False)),
                   run_key=str(outputs.get("run_metadata_key") or RUN_KEY),
                   namespace=str(outputs.get("guest_attribute_namespace") or NAMESPACE))

    @property
    def flavour(self) -> str:
        """The trainer image's flavour (tag) for these nodes: cpu, cuda or tpu."""
        from gantry.images import flavour
        return flavour(self.use_gpu, self.use_tpu)

    @property
    def master(self) -> Node:
        return self.nodes[0]

    def bucket_url(self, environ: Mapping[str, str]) -> str:
        return (environ.get(BUCKET_URL_ENV) or f"gs://{self.bucket}").rstrip("/")

    def run_url(self, run_id: str, environ: Mapping[str, str]) -> str:
        return f"{self.bucket_url(environ)}/runs/{run_id}"


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S")


def check_run_id(run_id: str) -> str:
    """The contract's one run-id rule (RunSpec's), refused here in one line before anything is asked of Google."""
    try:
        return contract_run_id(run_id)
    except ValueError as error:
        raise GantryError(str(error), "Name the run as `make run-gcp` names it (run-YYYYmmdd-HHMMSS), e.g. "
                          "--run-id my-run-2.") from None


def launch_specs(cluster: Cluster, run_id: str, image: str, args: list[str], *, run_url: str,
                 master_port: int | None = None, nproc_per_node: int = 0, action: str = "start",
                 torchrun: bool = False, command: bool = False, sync: tuple = (),
                 sync_seconds: int = DEFAULT_SYNC_SECONDS, stats_file: str = "", max_minutes: float | None = None,
                 stall_minutes: float = 0.0, env: tuple = (), shm_size: str = "", cpus: float = 0.0,
                 gpu_ids: tuple = (), figures: dict | None = None, show: dict | None = None,
                 ray: bool = False) -> list[RunSpec]:
    """One spec per node: the same run and program, each node its rank. With ``torchrun`` the args are a program
    (`-m MODULE ARGS`) run under torchrun as they are; with ``command`` a command run as given; else words for the
    image's entry point. Every launch has a time limit (``max_minutes``, DEFAULT_RUN_MAX_MINUTES unless given; 0:
    none) that the nodes' agents enforce, whatever runs; ``figures`` and ``show`` are what status shows of it."""
    launched_at = f"{time.time():.3f}"  # a new launch of the same run (a resume) is a change the agent acts on
    port = {"master_port": master_port} if master_port else {}
    limit = DEFAULT_RUN_MAX_MINUTES if max_minutes is None else max_minutes
    return [RunSpec(run_id=run_id, image=image, args=tuple(args), node_rank=node.rank, nnodes=len(cluster.nodes),
                    master_addr=cluster.master_address, nproc_per_node=nproc_per_node or 0, gpu=cluster.use_gpu,
                    tpu=cluster.use_tpu, node_addrs=cluster.node_addrs, action=action, launched_at=launched_at,
                    run_dir=run_url, torchrun=torchrun, command=command, sync=tuple(sync),
                    sync_seconds=sync_seconds, stats_file=stats_file, max_minutes=limit, stall_minutes=stall_minutes,
                    env=tuple(env), shm_size=shm_size, cpus=cpus, gpu_ids=tuple(gpu_ids),
                    figures=tuple((figures or {}).items()), show=dict(show or {}), ray=ray, **port)
            for node in cluster.nodes]


# ---- the nodes' API: Compute Engine for VMs (gantry.gcp.compute_nodes), Cloud TPU for a TPU VM (gantry.gcp.tpu_nodes) ----
class NodeApi(Protocol):
    """What the run verbs ask of the API that manages the nodes; ``connect`` picks one by ``Cluster.use_tpu``."""

    def node_status(self, node: Node) -> NodeStatus:
        """Its state, the agent's report (guest attributes) and its run spec; vm DELETED when the API has no such node."""

    def read_spec(self, node: Node) -> RunSpec | None:
        """The run spec in its metadata, or None."""

    def write_spec(self, node: Node, spec: RunSpec) -> None:
        """The spec into its metadata, every other key (the agent, the startup script) kept."""

    def ensure_running(self, say: Callable[[str], None], timeout_s: float = 600, poll_s: float = 5) -> None:
        """Start the stopped nodes and wait until every node is up."""

    def start(self, node: Node) -> None:
        """Start one stopped node (a preempted Spot node, or one its agent or `gantry stop` stopped)."""

    def power_down(self, node: Node) -> bool:
        """Stop the node's billing once its run stopped; False where the node does that itself (the agent's idle
        shutdown of a VM)."""

    def power_off(self, node: Node) -> bool:
        """Stop the node now, whatever stops it later by itself (`gantry stop --power-off`); False if it is not up."""

    def output(self, node: Node, start: int = 0) -> tuple[str, int]:
        """The trainer's output on the node from byte ``start``: (text, the next start)."""


def wait_until_up(waiting: list[Node], state_of: Callable[[Node], str], up: str, timeout_s: float, poll_s: float,
                  what: str, fix: str) -> None:
    """Poll ``state_of`` until every node in ``waiting`` is ``up``; past ``timeout_s`` one error names the laggards
    (``what``: "node(s)" or "TPU node(s)") and ``fix``."""
    deadline = time.monotonic() + timeout_s
    while waiting:
        waiting = [n for n in waiting if state_of(n) != up]
        if not waiting:
            break
        if time.monotonic() > deadline:
            names = ", ".join(n.name for n in waiting)
            raise GantryError(f"{what} {names} did not reach {up} in {timeout_s:.0f} s", fix)
        time.sleep(poll_s)


def nodes_deleted(nodes, by: str = "Google Compute Engine") -> GantryError:
    """Google deletes Spot nodes with termination_action = DELETE (at preemption, or at max_run_hours)."""
    names = ", ".join(f"{n.name} ({n.zone})" for n in nodes)
    return GantryError(f"node(s) {names} no longer exist: {by} deleted them (Spot preemption or "
                       "max_run_hours with termination_action = DELETE)", RECREATE_FIX)


def tpu_preempted(nodes, run_id: str = "") -> GantryError:
    """A preempted Spot TPU cannot be started again: Cloud TPU only lets it be deleted
    (cloud.google.com/tpu/docs/preemptible: the node's state changes from READY to PREEMPTED)."""
    names = ", ".join(f"{n.name} ({n.zone})" for n in nodes)
    delete = "; ".join(f"gcloud compute tpus tpu-vm delete {n.name} --zone={n.zone}" for n in nodes)
    fix = RECREATE_FIX.replace("RUN_ID", run_id) if run_id else RECREATE_FIX
    return GantryError(f"TPU node(s) {names} were preempted: a preempted Spot TPU cannot be started again, only "
                       "deleted and created anew", f"Delete it (`{delete}`), then: {fix}")


@dataclass
class NodeStatus:
    node: Node
    vm: str  # the API's state: RUNNING, TERMINATED, ... (Compute); READY, STOPPED, PREEMPTED, ... (Cloud TPU)
    boot: str  # the startup script's gantry/boot: starting | ready | error: ...
    report: Report  # the agent's NAMESPACE/REPORT_KEY (gantry.agent.Agent.report)
    spot: bool = False  # scheduling.provisioningModel SPOT: Google may stop (or delete) it at any time
    spec: RunSpec | None = None  # the run spec in its metadata
    up_state: str = "RUNNING"  # the state of a node that is up: RUNNING (Compute), READY (Cloud TPU)
    up_since: float | None = None  # epoch seconds of its last start (Compute's lastStartTimestamp); None: unknown

    def uptime_s(self, now: float | None = None) -> float | None:
        """Seconds since the node last started, while it is up (and billing); None when down or unknown."""
        if not self.up or self.up_since is None:
            return None
        return max(0.0, (time.time() if now is None else now) - self.up_since)

    @property
    def up(self) -> bool:
        return self.vm == self.up_state

    @property
    def state(self) -> str:
        if not self.up:
            return self.vm.lower()
        return self.report.state.value if self.report.state else (f"boot {self.boot}" if self.boot else "booting")

    def heartbeat_age_s(self, now: float | None = None) -> float | None:
        beat = self.report.heartbeat
        return None if beat is None else max(0.0, (now or time.time()) - float(beat))


def require_nodes(statuses: list[NodeStatus]) -> None:
    """One error naming the deleted (or preempted TPU) nodes and `make apply`, rather than a 404 per node."""
    gone = [s.node for s in statuses if s.vm == DELETED]
    if gone:
        raise nodes_deleted(gone, "Cloud TPU" if statuses[0].up_state != "RUNNING" else "Google Compute Engine")
    preempted = [s for s in statuses if s.vm == TPU_PREEMPTED]
    if preempted:
        raise tpu_preempted([s.node for s in preempted], preempted[0].spec.run_id if preempted[0].spec else "")


def restart_preempted(api: NodeApi, cluster: Cluster, statuses: list[NodeStatus],
                      say: Callable[[str], None], environ: Mapping[str, str]) -> list[Node]:
    """Start the Spot nodes that stopped while their run spec says start (preempted, or powered off by their agent
    while a peer was gone); their agents start the program again and it resumes (from the trainer's newest
    checkpoint, or its --sync folders). A launch that ended on a node (its program exited 0, its time limit came, it
    was stopped: the agent's EndRecord), or whose deadline has passed, is over: starting that node would only bill."""
    started = []
    for s in statuses:
        if s.spot and s.vm in STOPPED_STATES and s.spec is not None and s.spec.action == "start":
            ended = launch_ended(s.spec)
            if ended:
                say(f"node {s.node.rank} {s.node.name}: {s.vm.lower()}, left off: run {s.spec.run_id} {ended}")
                continue
            synced = ", its --sync folders back from the bucket" if s.spec.sync else ""
            again = f"its program starts again as given, in the same run folder{synced}"
            bills = "" if LOCAL_ENV in environ else " (it bills while it runs)"
            say(f"node {s.node.rank} {s.node.name}: Spot VM {s.vm} during run {s.spec.run_id}: starting it{bills}; "
                f"{again}")
            api.start(s.node)
            started.append(s.node)
    return started


def active_runs(statuses: list[NodeStatus]) -> dict[str, list[NodeStatus]]:
    """{run id: the nodes it holds} for runs an agent is pulling, running, restarting or stopping."""
    active: dict[str, list[NodeStatus]] = {}
    for status in statuses:
        if status.up and status.report.state in ACTIVE_STATES and status.report.run:
            active.setdefault(status.report.run, []).append(status)
    return active


ENDED_AS = {"exited": "ended: its program exited 0", "time-limit": "ended at its time limit",
            "stopped": "was stopped (gantry stop)"}


def launch_ended(spec: RunSpec, now: float | None = None) -> str:
    """Why ``spec``'s launch is over on its node ("" while it is not): the node's agent recorded its end in the
    bucket (launch_contract.EndRecord: whatever the program wrote), or its deadline passed while the node was off."""
    import fsspec

    record = None
    try:
        if spec.run_dir:
            with fsspec.open(ended_url(spec.run_dir, spec.node_rank), "r", **FRESH) as raw:
                record = EndRecord.from_json(raw.read())
    except (FileNotFoundError, OSError, ValueError):
        pass
    if record is not None and record.launch == spec.launch_id:
        return f"{ENDED_AS.get(record.reason, record.reason)} ({time.strftime('%H:%M UTC', time.gmtime(record.at))})"
    deadline = spec.deadline
    if deadline is not None and (time.time() if now is None else now) >= deadline:
        return (f"reached its time limit ({spec.max_minutes:g} min, at "
                f"{time.strftime('%H:%M UTC', time.gmtime(deadline))}) while the node was off")
    return ""


def run_ids(bucket_url: str) -> list[str]:
    """The runs the bucket holds (the folders under runs/), oldest first as run-YYYYmmdd-HHMMSS sorts."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(f"{bucket_url}/runs", **FRESH)
    try:
        entries = fs.ls(root, detail=True)
    except FileNotFoundError:
        return []
    return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory")


def fetch(run_url: str, destination: str) -> list[tuple[str, int]]:
    """Copy the whole run (each node's --sync folders under sync/node-RANK/, the kit's trainer's run folder among
    them, and the agents' end records) into ``destination``; (relative path, bytes) for each file. Files already here with the same
    size are skipped, so a fetch during training brings only what is new."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(run_url, **FRESH)
    if not fs.exists(root):
        raise GantryError(f"no run at {run_url}", f"List the runs with `gsutil ls {run_url.rsplit('/', 1)[0]}/`, "
                          "or check the run id `make run-gcp` printed.")
    root = root.rstrip("/")
    copied = []
    for path, info in sorted(fs.find(root, detail=True).items()):
        relative = path[len(root):].lstrip("/")
        name = relative.rsplit("/", 1)[-1]
        if is_partial(name):
            continue  # uploads in progress (launch_contract.partial_name); a --sync folder's own dot-files come home
        target = os.path.join(destination, *relative.split("/"))
        size = int(info.get("size") or 0)
        if os.path.isfile(target) and os.path.getsize(target) == size:
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fs.get(path, partial_name(target))
        os.replace(partial_name(target), target)
        copied.append((relative, os.path.getsize(target)))
    return copied
