"""A Ray launch (RunSpec.ray, `gantry run --ray`) in the agent's hands: node 0's `docker run` starts a Ray head and
then the program, the others join it; a worker's launch ends when node 0's has; `ray status` read for the report.
The cluster itself, real Ray in the local cloud's nodes, is test_local_cloud's."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, replace

import pytest
from gantry_agent import ray_cluster, storage
from gantry_agent.containers import docker_run_args
from gantry_agent.decide import Ended, Memory, Observation, SetState, Stop, decide
from gantry_agent.settings import Settings
from launch_contract import RAY_ADDRESS_ENV, EndRecord, RunSpec, State, ended_url

# `ray status` of Ray 2.60.0 with a head and one worker joined, as it printed it here (ray start on one machine)
TWO_NODES = """\
======== Autoscaler status: 2026-12-07 16:16:21.898577 ========
Node status
---------------------------------------------------------------
Active:
 1 node_010ca6ccc790791ec3d769b8bdd2087b4855620dec30759788dfa5a1
 1 node_b99325f04a2de51e45ec6d15a26dc281f75a134836aaa800556524d7
Pending:
 (no pending nodes)
Recent failures:
 (no failures)

Resources
---------------------------------------------------------------
Total Usage:
 0.0/4.0 CPU
 0B/32.59GiB memory
 0B/13.97GiB object_store_memory

From request_resources:
 (none)
Pending Demands:
 (no resource demands)
"""


def ray_spec(rank: int, **extra) -> RunSpec:
    return RunSpec(**{"run_id": "r1", "image": "repo/ray@sha256:abc", "node_rank": rank, "nnodes": 3,
                      "master_addr": "10.0.0.2", "command": True, "ray": True, "launched_at": "100.0",
                      "run_dir": "gs://b/runs/r1", "args": ("python", "selfplay.py", "--games", "64"), **extra})


def env_of(args: list[str]) -> dict[str, str]:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-e")


def test_node_0_starts_the_head_then_the_program_and_the_others_join_it():
    settings = Settings({})
    head = docker_run_args(ray_spec(0), "/runs/r1", settings)
    image = head.index("repo/ray@sha256:abc")
    assert head[image - 2:image] == ["--entrypoint", ""]
    assert head[image + 1:] == ["sh", "-c", ray_cluster.HEAD, "gantry-ray-head", "python", "selfplay.py", "--games",
                                "64"]
    assert env_of(head)[RAY_ADDRESS_ENV] == "10.0.0.2:6379"
    worker = docker_run_args(ray_spec(2), "/runs/r1", settings)
    assert worker[worker.index("repo/ray@sha256:abc") + 1:] == ["sh", "-c", ray_cluster.WORKER]
    assert env_of(worker)[RAY_ADDRESS_ENV] == "10.0.0.2:6379"
    # Ray's object store's share of the node's memory in /dev/shm, unless the launch names its own
    assert head[head.index("--shm-size") + 1] == ray_cluster.shm_size() != settings.shm_size
    assert docker_run_args(ray_spec(0, shm_size="2g"), "/runs/r1", settings)[head.index("--shm-size") + 1] == "2g"


def test_the_head_script_runs_the_program_with_its_words_intact_and_not_when_ray_fails(tmp_path):
    """sh -c HEAD NAME ARGS...: the words reach the program as they were, after `ray start` succeeds."""
    fake = tmp_path / "ray"
    fake.write_text("#!/bin/sh\necho \"ray $*\" >> \"$LOG\"\nexit \"${RAY_EXIT:-0}\"\n")
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "LOG": str(tmp_path / "log")}
    program = ["python3", "-c", "import sys; print(sys.argv[1:])", "a b", "$HOME"]
    ran = subprocess.run(["sh", "-c", ray_cluster.HEAD, "gantry-ray-head", *program], env=env, capture_output=True,
                         text=True, check=False)
    assert ran.stdout == "['a b', '$HOME']\n" and ran.returncode == 0
    assert (tmp_path / "log").read_text().startswith("ray start --disable-usage-stats --head --port=6379")
    refused = subprocess.run(["sh", "-c", ray_cluster.HEAD, "gantry-ray-head", *program],
                             env={**env, "RAY_EXIT": "3"}, capture_output=True, text=True, check=False)
    assert refused.returncode == 3 and refused.stdout == ""  # the agent counts a crash and starts it again


def test_a_worker_ends_its_launch_when_node_0_recorded_the_end_of_the_same_launch():
    worker = ray_spec(1)
    memory = Memory(container=worker.container, launch=worker.launch_id, seen_running=frozenset({worker.container}))
    observed = Observation(spec=worker, now=5.0, statuses={worker.container: ("running", None)}, head_ended=True)
    memory, actions = decide(memory, observed, 10.0, 30.0)
    assert isinstance(actions[0], Stop) and actions[0].container == worker.container
    ended = next(a for a in actions if isinstance(a, Ended))
    assert ended.reason == "exited" and "node 0's program ended" in ended.detail
    assert actions[-1] == SetState(State.FINISHED, "run r1 finished on node 0")
    # a worker prints nothing once it has joined: quiet is no stall there, as it is on node 0
    quiet = Observation(spec=replace(worker, stall_minutes=1), now=5.0, statuses={worker.container: ("running", None)},
                        quiet_s=3600.0)
    assert not any(isinstance(a, Stop) for a in decide(Memory(), quiet, 10.0, 30.0)[1])
    head = replace(ray_spec(0), stall_minutes=1)
    assert any(isinstance(a, Stop) for a in decide(Memory(), replace(quiet, spec=head, statuses={
        head.container: ("running", None)}), 10.0, 30.0)[1])
    # node 0 itself, and a launch that is no Ray cluster, never end on that observation
    for spec in (ray_spec(0), replace(worker, ray=False)):
        _, actions = decide(Memory(), replace(observed, spec=spec, statuses={spec.container: ("running", None)}),
                            10.0, 30.0)
        assert not any(isinstance(a, Ended) for a in actions)


def test_head_ended_reads_node_0s_record_of_this_launch_only(tmp_path):
    worker = ray_spec(1, run_dir=(tmp_path / "runs" / "r1").as_uri())
    assert ray_cluster.head_ended(worker, lambda: "", "") is False  # no record yet
    record = tmp_path / "runs" / "r1" / "ended" / "node-0.json"
    record.parent.mkdir(parents=True)
    assert ended_url(worker.run_dir, 0) == record.as_uri()
    record.write_text(json.dumps(asdict(EndRecord("r1@99.0", 0, "exited", 1.0))))  # an earlier launch's end
    assert ray_cluster.head_ended(worker, lambda: "", "") is False
    record.write_text(json.dumps(asdict(EndRecord(worker.launch_id, 0, "exited", 2.0))))
    assert ray_cluster.head_ended(worker, lambda: "", "") is True


def test_a_missing_object_reads_as_none_and_an_unreachable_bucket_as_not_ended():
    from local_cloud.storage import gcs_server

    with gcs_server("gantry-runs") as server:
        assert storage.read("gs://gantry-runs/runs/r1/ended/node-0.json", lambda: "t", server.url) is None
        storage.upload("gs://gantry-runs/runs/r1/ended/node-0.json", b"{}", lambda: "t", server.url)
        assert storage.read("gs://gantry-runs/runs/r1/ended/node-0.json", lambda: "t", server.url) == b"{}"
    with pytest.raises(storage.StorageError):
        storage.read("gs://b/x", lambda: "t", "http://127.0.0.1:9", timeout=5)
    assert ray_cluster.head_ended(ray_spec(1), lambda: "t", "http://127.0.0.1:9") is False


def test_ray_status_is_read_as_the_clusters_nodes_cpus_and_gpus():
    assert ray_cluster.cluster_size(TWO_NODES) == {"nodes": 2, "CPU": 4.0, "GPU": 0.0}
    with_gpus = TWO_NODES.replace(" 0B/32.59GiB memory", " 1.0/8.0 GPU\n 0B/32.59GiB memory")
    assert ray_cluster.cluster_size(with_gpus) == {"nodes": 2, "CPU": 4.0, "GPU": 8.0}
    assert ray_cluster.cluster_size("No cluster status. It may take a few seconds for the Ray internal services to "
                                    "start up.") == {}


def test_the_spec_refuses_a_ray_launch_that_is_no_command_or_names_the_heads_address():
    with pytest.raises(ValueError, match="ray without a command"):
        ray_spec(0, command=False)
    with pytest.raises(ValueError, match="RAY_ADDRESS is the Ray head's address"):
        ray_spec(0, env=("RAY_ADDRESS=10.0.0.9:6379",))


def test_node_0_asks_ray_status_every_5_s_until_every_node_joined_then_every_30_s(monkeypatch):
    one_node = TWO_NODES.replace(" 1 node_010ca6ccc790791ec3d769b8bdd2087b4855620dec30759788dfa5a1\n", "")
    said, asked = iter(["No cluster status. It may take a few seconds for the Ray internal services to start up.",
                        one_node, TWO_NODES]), []

    def docker(*args, timeout):
        asked.append(args)
        return subprocess.CompletedProcess(args, 0, stdout=next(said), stderr="")

    clock = iter([100.0, 100.0, 103.0, 106.0, 106.0, 111.0, 111.0, 125.0, 137.0])
    monkeypatch.setattr(ray_cluster.time, "monotonic", lambda: next(clock))
    watch = ray_cluster.ClusterWatch()
    watch.read(docker, "gantry-run-r1-0", nodes=2)  # 100 s: asked, not up yet
    watch.read(docker, "gantry-run-r1-0", nodes=2)  # 103 s: too soon
    watch.read(docker, "gantry-run-r1-0", nodes=2)  # 106 s: the head alone
    assert watch.size["nodes"] == 1
    watch.read(docker, "gantry-run-r1-0", nodes=2)  # 111 s: 5 s on, node 1 has joined
    assert asked == [("exec", "gantry-run-r1-0", "ray", "status")] * 3
    assert watch.size == {"nodes": 2, "CPU": 4.0, "GPU": 0.0}
    watch.read(docker, "gantry-run-r1-0", nodes=2)  # 125 s: within 30 s of the whole cluster
    assert len(asked) == 3
