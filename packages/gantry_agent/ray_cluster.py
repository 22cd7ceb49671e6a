"""A Ray cluster across a launch's nodes (RunSpec.ray, `gantry run --ray`), as Ray's own guide starts one by hand
(docs.ray.io, "Launching an On-Premise Cluster": `ray start --head --port=6379` on one machine, `ray start
--address=HEAD:6379` on the others):

    node 0     ray start --head, then the program (exec), with RAY_ADDRESS: its own ray.init() joins the cluster
    node 1..   ray start --address=$RAY_ADDRESS --block, again whenever it drops out (the head restarted after a
               preemption, or not up yet): the node runs nothing else

A worker's container never ends by itself: its agent ends its launch when node 0's has ended (node 0's EndRecord
in the bucket, ``head_ended``), so a finished program leaves no node billing. Node 0's agent asks `ray status`
now and then for what `gantry status` shows: the cluster's nodes, CPUs and GPUs (``cluster_size``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time

from launch_contract import RAY_ADDRESS_ENV, RAY_PORT, EndRecord, RunSpec, ended_url

from . import storage

# Ray's object store takes 30% of the node's memory unless told otherwise (ray_constants.
# DEFAULT_OBJECT_STORE_MEMORY_PROPORTION) and falls back to /tmp, slower, when /dev/shm is smaller.
OBJECT_STORE_SHARE = 0.3
STATUS_EVERY_SECONDS = 30.0  # how often node 0's agent asks `ray status`; every 5 s while nodes are still joining
STATUS_JOINING_SECONDS = 5.0
START = "ray start --disable-usage-stats"
HEAD = f'{START} --head --port={RAY_PORT} --include-dashboard=false && exec "$@"'
WORKER = (f'while :; do {START} --address="${RAY_ADDRESS_ENV}" --block; ray stop --force >/dev/null 2>&1; '
          'echo "gantry: this node left the Ray cluster; joining again in 5 s"; sleep 5; done')


def address(spec: RunSpec) -> str:
    return f"{spec.master_addr}:{RAY_PORT}"


def shm_size() -> str:
    """/dev/shm for a Ray node: the object store's share of this machine's memory, in docker's bytes."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{int(total * OBJECT_STORE_SHARE)}b"


def command(spec: RunSpec) -> list[str]:
    """What the container runs instead of the bare command: sh starts Ray, then (node 0) execs the program."""
    if spec.node_rank == 0:
        return ["sh", "-c", HEAD, "gantry-ray-head", *spec.args]
    return ["sh", "-c", WORKER]


def head_ended(spec: RunSpec, token, storage_url: str) -> bool:
    """Whether node 0's agent recorded the end of this launch (exit 0, its time limit, a stop) in the bucket."""
    try:
        raw = storage.read(ended_url(spec.run_dir, 0), token, storage_url)
    except storage.StorageError:
        return False  # unreachable now: asked again next loop
    record = EndRecord.from_json(raw) if raw is not None else None
    return record is not None and record.launch == spec.launch_id


class ClusterWatch:
    """Node 0's view of its cluster for the report: `ray status` in its container, every 5 s until every node of the
    launch has joined, then every 30 s (the cluster changes when a node joins or leaves, not in between)."""

    def __init__(self):
        self.size, self.asked = {}, 0.0

    def read(self, docker, container: str, nodes: int) -> None:
        joined = self.size.get("nodes", 0) >= nodes
        every = STATUS_EVERY_SECONDS if joined else STATUS_JOINING_SECONDS
        if time.monotonic() - self.asked < every:
            return
        self.asked = time.monotonic()
        try:
            said = docker("exec", container, "ray", "status", timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return  # asked again at the next turn
        self.size = cluster_size(said) or self.size


NODE_LINE = re.compile(r"^\s*(\d+) node_[0-9a-f]+\s*$")
RESOURCE_LINE = re.compile(r"^\s*[\d.]+/([\d.]+) (CPU|GPU)\s*$")


def cluster_size(status_text: str) -> dict:
    """`ray status`'s text, read: {"nodes": N, "CPU": n, "GPU": n} (its Active nodes and its usage's totals); {}
    when it says neither (the head is not up yet)."""
    size, section = {}, ""
    for line in status_text.splitlines():
        if line.strip().endswith(":"):
            section = line.strip()
            continue
        node = NODE_LINE.match(line)
        if node and section == "Active:":
            size["nodes"] = size.get("nodes", 0) + int(node.group(1))
        resource = RESOURCE_LINE.match(line)
        if resource:
            size[resource.group(2)] = float(resource.group(1))
    if "nodes" in size:
        size.setdefault("CPU", 0.0)
        size.setdefault("GPU", 0.0)
    return size
