"""A launch that runs any command (RunSpec.command) with --sync folders and its own stats file: the agent's
`docker run`, its decision when the command fails, and the agent process end to end against fake_metadata and
fake_docker, the bucket behind fake-gcs-server (packages/local_cloud/storage.py)."""

from __future__ import annotations

import json
import sys
import time

import pytest
from agent_helpers import HERE, Node, spec, wait_until
from gantry_agent.containers import docker_run_args
from gantry_agent.decide import Memory, Observation, SetState, decide
from gantry_agent.settings import Settings
from launch_contract import (
    CONTRACT_ENV,
    DEADLINE_ENV,
    EVERY_CONTAINER_ENV,
    RUN_KEY,
    EndRecord,
    RunSpec,
    State,
    ended_url,
    sync_url,
)

WORKDIR = "/workspace"
PROGRAM = HERE / "stub_program.py"


def command_spec(**extra) -> RunSpec:
    return RunSpec(**{"run_id": "r1", "image": "repo/project@sha256:abc", "node_rank": 1, "nnodes": 2,
                      "master_addr": "10.0.0.2", "command": True, "args": ("python", "scripts/train.py", "--gpus",
                                                                           "all"), **extra})


def env_of(args: list[str]) -> dict[str, str]:
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "-e")


def test_a_command_runs_as_given_without_the_images_entry_point_with_the_gantry_names(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm"):  # four GPUs, two others
        (dev / name).touch()
    settings = Settings({"GANTRY_AGENT_DEV_DIR": str(dev)})
    run = command_spec(gpu=True, node_addrs=("10.0.0.2", "10.0.0.3"), sync=("checkpoints", "out/logs"))
    args = docker_run_args(run, "/var/lib/gantry/runs/r1", settings, workdir=WORKDIR)
    image = args.index(run.image)
    assert args[image - 2:] == ["--entrypoint", "", run.image, "python", "scripts/train.py", "--gpus", "all"]
    assert args[args.index("--gpus") + 1] == "all"
    env = env_of(args)
    assert (env["GANTRY_NODE_RANK"], env["GANTRY_NUM_NODES"], env["GANTRY_GPUS_PER_NODE"]) == ("1", "2", "4")
    assert env["GANTRY_NODE_IPS"] == "10.0.0.2,10.0.0.3" and env["NODE_RANK"] == "1"  # torchrun's names stay
    mounts = [args[i + 1] for i, a in enumerate(args) if a == "-v"]
    assert mounts == ["/var/lib/gantry/runs/r1:/runs", "/var/lib/gantry/runs/r1/sync/checkpoints:/workspace/checkpoints",
                      "/var/lib/gantry/runs/r1/sync/out/logs:/workspace/out/logs"]
    # an image without a WORKDIR runs in /; a CPU node has no GPUs; one node's IPs may be unknown (absent)
    cpu = docker_run_args(command_spec(sync=("ckpt",)), "/runs-r1", settings)
    assert "/runs-r1/sync/ckpt:/ckpt" in cpu and env_of(cpu)["GANTRY_GPUS_PER_NODE"] == "0"
    assert "GANTRY_NODE_IPS" not in env_of(cpu)
    # what the contract says every container gets (gantry run's description of a command names them from it)
    with_folder = docker_run_args(command_spec(node_addrs=("10.0.0.2", "10.0.0.3"), run_dir="gs://b/runs/r1"),
                                  "/runs-r1", settings)
    assert set(EVERY_CONTAINER_ENV) <= set(env_of(with_folder)) <= CONTRACT_ENV


@pytest.mark.parametrize("kind", ["selfplay", "torchrun"])
def test_every_container_gets_the_gantry_names(tmp_path, kind):
    run = RunSpec(run_id="r1", image="i@sha256:abc", node_rank=0, nnodes=1, master_addr="10.0.0.2",
                  torchrun=kind == "torchrun", args=("-m", "x") if kind == "torchrun" else ())
    args = docker_run_args(run, str(tmp_path), Settings({"GANTRY_AGENT_DEV_DIR": str(tmp_path)}))
    assert env_of(args) | {"GANTRY_NODE_RANK": "0", "GANTRY_NUM_NODES": "1", "GANTRY_GPUS_PER_NODE": "0"} == \
        env_of(args)
    assert '""' not in args and ("--entrypoint" in args) == (kind == "torchrun")


def test_a_command_that_fails_is_reported_with_its_exit_code_and_last_line():
    run = command_spec()
    memory = Memory(seen_running=frozenset({run.container}), container=run.container, launch=run.launch_id)
    observed = Observation(spec=run, now=10.0, statuses={run.container: ("exited", 127)},
                           last_line="sh: 1: pythn: not found")
    memory, actions = decide(memory, observed, restart_seconds=10.0, crash_loop_minutes=30.0)
    assert SetState(State.RESTARTING, "exited 127: sh: 1: pythn: not found") in actions
    assert memory.loop_since == 10.0  # the crash-loop clock runs: the node powers off unless a step comes


# ---- the agent process ----


def test_a_command_resumes_from_its_restored_folder_reports_its_stats_and_is_copied_until_it_stops(tmp_path, metadata,
                                                                                                    nodes, gcs):
    gcs.create_bucket("runs-bucket")
    run_dir = "gs://runs-bucket/runs/r5"
    copied = sync_url(run_dir, 0, "ckpt")
    assert copied == "gs://runs-bucket/runs/r5/sync/node-0/ckpt"
    gcs.write(f"{copied}/step-40.txt", b"step 40\n")  # what the node wrote before its preemption
    node = Node(tmp_path / "node", metadata, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR, GANTRY_AGENT_STOP_GRACE_SECONDS="20",
                STORAGE_EMULATOR_HOST=gcs.url)
    nodes.append(node.start())
    run = {"command": True, "args": [sys.executable, str(PROGRAM)], "run_dir": run_dir, "sync": ["ckpt"],
           "sync_seconds": 1, "stats_file": "metrics.json", "node_addrs": ["127.0.0.1"]}
    metadata.set_attribute(RUN_KEY, spec("r5", **run))
    # the step (from the stats file) and the last line (from the log) reach the report on separate reads: wait for both
    report = wait_until(lambda: (node.report().get("step") or 0) > 42 and node.report().get("last_line") and node.report(),
                        what="the program's step and its last line")
    assert report["state"] == "running" and "resumed from step 40" in node.output()  # restored before it started
    assert report["figures"]["iteration"] == report["step"] and set(report["figures"]) == {"iteration", "loss", "lr"}
    assert report["last_line"].startswith("iteration ") and abs(report["last_line_at"] - time.time()) < 30
    assert "GANTRY_NODE_IPS=127.0.0.1 GANTRY_NODE_RANK=0 GANTRY_NUM_NODES=1" in node.output()
    (docker_run,) = node.docker_calls("run")
    assert docker_run[docker_run.index("--entrypoint") + 1] == ""
    assert f"{node.root}/var/runs/r5/sync/ckpt:{WORKDIR}/ckpt" in docker_run
    wait_until(lambda: gcs.exists(f"{copied}/step-45.txt"), what="a copy while the program runs")  # every second
    assert node.docker_calls("cp")[0][1] == f"gantry-run-r5-0:{WORKDIR}/metrics.json"  # the stats, out of it

    metadata.set_attribute(RUN_KEY, spec("r5", action="stop", **run))
    wait_until(lambda: node.report().get("state") == "stopped", what="the stopped report")
    assert node.docker_calls("stop")[0][:3] == ["stop", "-t", "15"]  # the grace, cut for the final copy
    assert gcs.read(f"{copied}/final.txt").startswith(b"stopped at step ")  # written at SIGTERM, then copied
    log = node.agent_output()
    order = ["stopping gantry-run-r5-0 (the run spec says stop): SIGTERM (the program checkpoints), up to 15 s to exit",
             "gantry-run-r5-0 stopped after", "(final copy)", "final copy of the --sync folders done in",
             "state stopped: run r5 stopped"]
    assert [log.index(line) for line in order] == sorted(log.index(line) for line in order), log
    ended = EndRecord.from_json(gcs.read(ended_url(run_dir, 0)))  # the agent's record, whatever the program wrote
    assert (ended.launch, ended.reason) == (RunSpec.from_json(spec("r5", **run)).launch_id, "stopped")


def test_the_time_limit_stops_a_command_copies_its_folder_records_its_end_and_no_restart_runs_it(tmp_path, metadata,
                                                                                                 nodes, gcs):
    gcs.create_bucket("runs-bucket")
    run_dir = "gs://runs-bucket/runs/r7"
    node = Node(tmp_path / "node", metadata, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR, STORAGE_EMULATOR_HOST=gcs.url)
    nodes.append(node.start())
    launched_at = time.time()
    run = {"command": True, "args": [sys.executable, str(PROGRAM)], "run_dir": run_dir, "sync": ["ckpt"],
           "max_minutes": 0.1, "launched_at": f"{launched_at:.3f}"}  # a limit 6 s after the launch
    metadata.set_attribute(RUN_KEY, spec("r7", **run))
    wait_until(lambda: node.report().get("state") == "finished", timeout=60, what="the end at the time limit")
    ended = EndRecord.from_json(gcs.read(ended_url(run_dir, 0)))
    assert (ended.reason, ended.launch) == ("time-limit", f"r7@{launched_at:.3f}") and ended.at >= launched_at + 6
    assert f"{DEADLINE_ENV}={launched_at + 6:.0f}" in node.output()  # the program saw when it would be stopped
    assert gcs.read(f"{sync_url(run_dir, 0, 'ckpt')}/final.txt").startswith(b"stopped at step ")  # SIGTERM, then copied
    assert "ended at its time limit, 0.1 min after the launch" in node.report()["detail"]
    node.stop()  # a reboot (a Spot node someone started again): the new agent starts nothing for it
    again = Node(tmp_path / "node", metadata, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR, STORAGE_EMULATOR_HOST=gcs.url)
    nodes.append(again.start())
    runs = len(again.docker_calls("run"))
    wait_until(lambda: "state finished" in again.agent_output(), what="the restarted agent's finished state")
    assert len(again.docker_calls("run")) == runs == 1


def test_a_command_that_prints_the_same_line_forever_is_stopped_and_restarted_at_its_stall_limit(tmp_path, metadata,
                                                                                                nodes):
    node = Node(tmp_path / "node", metadata, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR, GANTRY_AGENT_STOP_GRACE_SECONDS="2")
    nodes.append(node.start())
    hung = "while true; do echo 'Played games: 0'; sleep 0.2; done"  # a worker died; the main loop goes on printing
    metadata.set_attribute(RUN_KEY, spec("r8", command=True, args=["sh", "-c", hung], stall_minutes=0.05))  # 3 s
    wait_until(lambda: len(node.docker_calls("run")) >= 2, timeout=60, what="a restart after the stall")
    assert "stalled: no new output line or stats for" in node.agent_output()
    assert node.docker_calls("stop"), "stopped (SIGTERM, the grace) before the restart"


def test_a_command_that_fails_at_once_is_reported_with_its_last_line_and_not_restarted_forever(tmp_path, metadata,
                                                                                                nodes):
    node = Node(tmp_path / "node", metadata, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR,
                GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES="0.05")  # 3 s
    nodes.append(node.start())
    metadata.set_attribute(RUN_KEY, spec("r6", command=True, args=["sh", "-c", "pythn scripts/train.py"]))
    wait_until(lambda: node.report().get("detail") == "exited 127: sh: 1: pythn: not found",
               what="the exit code and the last line in the report")
    wait_until(node.poweroff_marker.exists, what="the crash-loop power-off")
    runs = len(node.docker_calls("run"))
    assert 2 <= runs <= 8, f"{runs} starts in the crash-loop window"  # restarted with a backoff, then off
    time.sleep(2)  # two of the agent's loops
    assert len(node.docker_calls("run")) == runs, "a powered-off node starts nothing more"
    assert node.report()["state"] == "powering-off" and "crash-looping" in node.report()["detail"]
    assert node.report()["last_line"] == "sh: 1: pythn: not found"


def test_at_preemption_the_agent_stops_the_command_then_copies_its_folder_within_the_spot_notice(tmp_path,
                                                                                                 metadata, nodes, gcs):
    gcs.create_bucket("runs-bucket")
    node = Node(tmp_path / "node", metadata, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR, STORAGE_EMULATOR_HOST=gcs.url)
    nodes.append(node.start())
    run = {"command": True, "args": [sys.executable, str(PROGRAM)], "run_dir": "gs://runs-bucket/runs/r7",
           "sync": ["ckpt"], "sync_seconds": 3600}  # no copy on the timer: the final copy alone
    metadata.set_attribute(RUN_KEY, spec("r7", **run))
    wait_until(lambda: "iteration 3" in node.output(), what="the program running")
    begun = time.monotonic()
    assert node.stop() == 0  # SIGTERM to the agent: what systemd sends at a shutdown or a Spot preemption
    took = time.monotonic() - begun
    copied = gcs.names("gs://runs-bucket/runs/r7/sync/node-0/ckpt")
    assert "final.txt" in copied and "step-3.txt" in copied
    assert took < 30, f"the stop path took {took:.1f} s of the Spot VM's 30"
    assert "the agent is stopping (shutdown or preemption)" in node.agent_output()
    print(json.dumps({"stop path (SIGTERM to the agent's exit)": f"{took:.2f} s"}))


def test_the_live_watch_keeps_the_bar_being_drawn_and_whole_lines_no_longer_set_the_last_line():
    import io

    from gantry_agent.outputs import RunOutputs

    class Attached:  # what Docker.attach gives: the output in the chunks it was written in
        def __init__(self, chunks):
            self.stdout = io.BufferedReader(io.BytesIO(b"".join(chunks)), buffer_size=7)  # chunks cut anywhere

        def wait(self):
            return 0

    outputs = RunOutputs(command_spec(), "/nonexistent", None, None, "", print)
    outputs.saw("epoch 1 | loss 0.5\n")  # docker logs' whole line, before any live output
    assert outputs.last_line == "epoch 1 | loss 0.5"
    outputs.watch_live(Attached([b"epoch 2\n", "\r played 3 gam\u00e9s".encode(), b"\r played 4 ga", b"mes \r"]))
    assert outputs.last_line == "played 4 games"  # the last drawing, its end cut anywhere (a UTF-8 letter too)
    outputs.saw("epoch 2\n")  # the same output through docker logs, late: the live line stays
    assert outputs.last_line == "played 4 games"
    # the program ends with an error on stderr, which only the follower sees (docker attach's stderr is the CLI's):
    # once the container has ended, the follower's last whole line is what the report names
    outputs.saw("selfplay: error: rank 0 stopped at step 53 because another rank was signalled\n")
    assert outputs.last_line == "played 4 games"  # while it runs, the live view wins
    outputs.observe("exited", now=0.0)
    assert outputs.last_line == "selfplay: error: rank 0 stopped at step 53 because another rank was signalled"
