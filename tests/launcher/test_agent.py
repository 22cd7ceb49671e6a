"""The node agent, run for real as a process against a fake metadata server and a fake docker CLI."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from agent_helpers import STUB_TRAINER, Node, spec, wait_until
from launch_contract import RUN_KEY
from local_cloud.googleapis import error

STUB = [sys.executable, str(STUB_TRAINER)]
WORKDIR = "/work"  # the stub's image's WORKDIR: where its stats file is (stub_trainer --out)
STATS = "stub/stats.jsonl"


def stub_spec(*args, **kwargs) -> str:
    """A run spec of the stub trainer, naming its stats file as a launch names a program's (--stats)."""
    return spec(*args, **{"stats_file": STATS, **kwargs})




def start_node(nodes, tmp_path, metadata, **settings) -> Node:
    node = Node(tmp_path / f"node{len(nodes)}", metadata, entrypoint=STUB,
                **{"FAKE_DOCKER_IMAGE_WORKDIR": WORKDIR, **settings}).start()
    nodes.append(node)
    return node


def test_an_idle_agent_waits_on_the_metadata_server_and_backs_off_on_errors(tmp_path, metadata, nodes):
    start_node(nodes, tmp_path, metadata, GANTRY_AGENT_WATCH_SECONDS="2")  # wait_for_change hangs 2 s a request
    wait_until(lambda: metadata.count("GET", "instance/attributes/"), what="the first metadata read")
    begin = time.monotonic()
    time.sleep(3)
    waits = metadata.count("GET", "instance/attributes/", since=begin)
    assert 1 <= waits <= 3, f"{waits} metadata reads in 3 s with nothing changing"

    metadata.fail_status = 503  # an outage answers at once: only the backoff (2, 4 s, ...) keeps it from spinning
    begin = time.monotonic()
    time.sleep(3)
    during_outage = metadata.count("GET", "instance/attributes/", since=begin)
    assert 1 <= during_outage <= 3, f"{during_outage} requests in 3 s of outage"
    assert "retrying in" in nodes[0].agent_output()


def test_a_run_spec_starts_the_trainer_and_action_stop_stops_it_gracefully(tmp_path, metadata, nodes):
    node = start_node(nodes, tmp_path, metadata)
    metadata.set_attribute(RUN_KEY, stub_spec("r1", node_rank=1, nnodes=2, args=["--steps", "0"]))
    wait_until(lambda: node.report().get("state") == "running" and (node.report().get("step") or 0) > 0,
               what="a running report with a step")
    assert node.report()["run"] == "r1"
    (run,) = node.docker_calls("run")
    assert run[run.index("--network") + 1] == "host" and "--shm-size" in run and "--gpus" not in run
    assert "NODE_RANK=1" in run and "NNODES=2" in run and "MASTER_ADDR=127.0.0.1" in run
    assert "MASTER_PORT=29511" in run and "NPROC_PER_NODE=1" in run
    assert run[run.index("-v") + 1].endswith(":/runs")
    assert run[-3:] == ["us-central1-docker.pkg.dev/p/gantry/trainer@sha256:abc", "--steps", "0"]
    (login,) = node.docker_calls("login")
    assert login[-1] == "https://us-central1-docker.pkg.dev"
    assert (node.docker_state / "login-token").read_text() == "fake-token-1"  # the VM's token, no password
    assert node.docker_calls("pull") == [["pull", "us-central1-docker.pkg.dev/p/gantry/trainer@sha256:abc"]]
    wait_until(lambda: "step 3 |" in node.output(), what="trainer output on the serial port")
    assert "stub trainer: node 1 of 2" in node.output()

    metadata.set_attribute(RUN_KEY, stub_spec("r1", action="stop", node_rank=1, nnodes=2))
    wait_until(lambda: node.report().get("state") == "stopped", what="the stopped report")
    assert node.docker_calls("stop")[0][:3] == ["stop", "-t", "20"]
    assert "SIGTERM: checkpoint at step" in node.output()  # stopped with a signal the trainer checkpoints on
    assert len(node.docker_calls("run")) == 1


def test_a_crashed_trainer_is_restarted_and_a_finished_one_is_not(tmp_path, metadata, nodes):
    node = start_node(nodes, tmp_path, metadata)
    marker = tmp_path / "crashed-once"
    metadata.set_attribute(RUN_KEY, stub_spec("r2", args=["--steps", "8", "--crash-once-at", "3",
                                                          "--marker", str(marker)]))
    wait_until(lambda: node.report().get("state") == "finished", what="the run to finish")
    assert marker.exists()
    assert len(node.docker_calls("run")) == 2  # the crash, then the run that finished
    assert "trainer exited with code 3; restart 1" in node.agent_output()
    time.sleep(2)  # two of the agent's loops
    assert len(node.docker_calls("run")) == 2  # exit 0 on its own = finished: not started again


def test_after_a_reboot_the_agent_starts_the_run_again(tmp_path, metadata, nodes):
    node = start_node(nodes, tmp_path, metadata)
    metadata.set_attribute(RUN_KEY, stub_spec("r3", args=["--steps", "0"]))
    wait_until(lambda: node.report().get("state") == "running", what="the run to start")
    node.stop(sig=9)  # the VM goes down: agent and container die without a word
    node.kill_containers()
    again = Node(node.root, metadata, entrypoint=STUB, FAKE_DOCKER_IMAGE_WORKDIR=WORKDIR).start()
    nodes.append(again)
    wait_until(lambda: len(again.docker_calls("run")) == 2, what="the run restarted after the reboot")
    wait_until(lambda: again.report().get("state") == "running", what="the running report")


def test_the_report_bucket_allows_a_burst_then_its_rate():
    """GCE rate-limits guest-attribute writes: at most ``burst`` at once, then ``per_minute`` (a fake clock)."""
    from gantry_agent.metadata import TokenBucket

    now = [0.0]
    bucket = TokenBucket(per_minute=20, burst=2, clock=lambda: now[0])
    assert [bucket.take() for _ in range(3)] == [True, True, False]
    now[0] = 2.9
    assert not bucket.take()  # one token every 3 s
    now[0] = 3.1
    assert bucket.take() and not bucket.take()
    now[0] = 60.0
    assert [bucket.take() for _ in range(3)] == [True, True, False]  # an idle minute refills the burst, no more


def test_guest_attribute_writes_stay_within_the_rate_limit(tmp_path, metadata, nodes):
    # Steps change every 0.1 s and the heartbeat is due at once: the bucket alone holds writes back.
    start_node(nodes, tmp_path, metadata, GANTRY_AGENT_REPORTS_PER_MINUTE="10", GANTRY_AGENT_REPORT_BURST="1",
               GANTRY_AGENT_HEARTBEAT_SECONDS="0.1")
    begin = time.monotonic()
    metadata.set_attribute(RUN_KEY, stub_spec("r4", args=["--steps", "0"]))
    time.sleep(4)
    writes = metadata.count("PUT", "guest-attributes/gantry/agent", since=begin)
    # burst 1 + 10/min x 4 s = 1.7 writes at most in any 4 s; without the bucket the agent writes at every loop (4)
    assert 1 <= writes <= 2, f"{writes} guest-attribute writes in 4 s"


@pytest.mark.skipif(os.geteuid() != 0, reason="the agent is root on a VM: handing the folder over needs root")
def test_the_run_folder_is_handed_to_the_images_user(tmp_path, metadata, nodes):
    """The trainer runs as the image's USER (1000:1000), the agent as root: the mounted folder must be its."""
    node = start_node(nodes, tmp_path, metadata, FAKE_DOCKER_IMAGE_USER="1000:1000")
    metadata.set_attribute(RUN_KEY, stub_spec("r6", args=["--steps", "0"]))
    wait_until(lambda: node.report().get("state") == "running", what="the run to start")
    (run,) = node.docker_calls("run")
    folder = Path(run[run.index("-v") + 1].split(":")[0])
    assert folder.name == "r6" and folder.stat().st_uid == 1000 and folder.stat().st_gid == 1000
    assert "--name gantry-run-r6-0" in " ".join(run)  # one container per run and node: nodes may share an engine


def test_an_idle_node_powers_itself_off(tmp_path, metadata, nodes):
    node = start_node(nodes, tmp_path, metadata, GANTRY_IDLE_SHUTDOWN_MINUTES="0.03")  # 1.8 s
    wait_until(node.poweroff_marker.exists, what="the power-off command")
    wait_until(lambda: node.report().get("state") == "powering-off", what="the powering-off report")


def test_a_failed_power_off_is_tried_again_after_the_retry_interval_not_at_every_loop(tmp_path, metadata, nodes):
    # The first `systemctl poweroff` fails (a busy systemd job queue, say), the second succeeds.
    attempts = tmp_path / "attempts"
    poweroff = f"sh -c 'date +%s.%N >> {attempts}; [ $(wc -l < {attempts}) -ge 2 ] && touch {tmp_path}/off'"
    node = start_node(nodes, tmp_path, metadata, GANTRY_IDLE_SHUTDOWN_MINUTES="0.03",
                      GANTRY_AGENT_STOP_RETRY_SECONDS="2", GANTRY_AGENT_POWEROFF=poweroff)
    wait_until((tmp_path / "off").exists, what="the second power-off attempt")
    time.sleep(1.5)  # a powered-off agent tries no more
    first, second = (float(t) for t in attempts.read_text().split())
    assert second - first >= 2  # one attempt, then none until the retry interval (2 s; a loop is 1 s) has passed
    wait_until(lambda: node.report().get("state") == "powering-off", what="the powering-off report")


def test_a_crash_looping_trainer_powers_its_node_off(tmp_path, metadata, nodes):
    # A Spot peer was preempted: this node's trainer fails at the rendezvous and restarts, step after step never
    # coming. After GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES (3 s here) the node stops billing.
    node = start_node(nodes, tmp_path, metadata, GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES="0.05")
    metadata.set_attribute(RUN_KEY, stub_spec("r7", node_rank=1, nnodes=2, args=["--no-rendezvous"]))
    wait_until(node.poweroff_marker.exists, what="the power-off command")
    assert len(node.docker_calls("run")) >= 2  # it was restarted first: one crash is no loop
    # the report goes out at once, unless the rate limit's bucket is empty that moment: then at the next loop
    report = wait_until(lambda: node.report().get("state") == "powering-off" and node.report(),
                        what="the powering-off report")
    assert "crash-looping" in report["detail"], report
    assert "GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES" in report["detail"] and "make status" in report["detail"]
    wait_until(lambda: "rendezvous timed out" in node.output(), what="the trainer's output on the serial port")


def test_the_crash_loop_limit_has_one_default():
    from gantry_agent.settings import CRASH_LOOP_SHUTDOWN_MINUTES, Settings

    assert Settings({}).crash_loop_minutes == CRASH_LOOP_SHUTDOWN_MINUTES == 30
    assert Settings({"GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES": "0"}).crash_loop_minutes == 0


def test_a_tpu_node_runs_the_tpu_image_with_the_chips_and_pjrt_device(tmp_path):
    """use_tpu: the launcher picks gantry-trainer:tpu and marks the spec; the agent gives the container the TPU
    (--privileged) and PJRT_DEVICE=TPU, on which the trainer's run.device=auto means XLA. CPU nodes get neither."""
    from gantry.launches import Cluster, launch_specs
    from gantry_agent.containers import docker_run_args
    from gantry_agent.settings import Settings
    from launch_contract import RunSpec
    from runs_helpers import cluster_outputs

    outputs = {**cluster_outputs(["gantry-tpu-0"]), "use_tpu": True}
    cluster = Cluster.from_outputs(outputs)
    assert cluster.flavour == "tpu"
    (tpu,) = launch_specs(cluster, "r1", "repo/gantry-trainer@sha256:abc", [], run_url="gs://b/runs/r1")
    assert RunSpec.from_json(tpu.to_json()).tpu  # the flag survives the trip through instance metadata
    (cpu,) = launch_specs(Cluster.from_outputs(cluster_outputs(["gantry-0"])), "r1", "i@sha256:abc", [],
                          run_url="gs://b/runs/r1")
    settings = Settings({})
    on_tpu, on_cpu = docker_run_args(tpu, str(tmp_path), settings), docker_run_args(cpu, str(tmp_path), settings)
    assert "--privileged" in on_tpu and "PJRT_DEVICE=TPU" in on_tpu and "--gpus" not in on_tpu
    # --privileged grants capabilities to root only: libtpu runs as root, with an unlimited memlock
    assert on_tpu[on_tpu.index("--user") + 1] == "0:0"
    assert on_tpu[on_tpu.index("--ulimit") + 1] == "memlock=-1:-1"
    assert on_tpu.index("--user") < on_tpu.index(tpu.image)  # docker options, not the trainer's arguments
    assert on_tpu[on_tpu.index("--network") + 1] == "host"
    assert "--privileged" not in on_cpu and not any(a.startswith("PJRT_DEVICE=") for a in on_cpu)
    assert "--user" not in on_cpu and "--ulimit" not in on_cpu  # CPU and GPU containers keep the image's USER


def test_a_tpu_vm_keeps_the_runs_output_in_the_bucket(tmp_path, metadata, nodes, gcs):
    # Cloud TPU has no serial port API, so `gantry logs` reads the run's output from the run's folder.
    gcs.create_bucket("runs-bucket")
    node = start_node(nodes, tmp_path, metadata, GANTRY_AGENT_CONSOLE_UPLOAD_SECONDS="0.5",
                      STORAGE_EMULATOR_HOST=gcs.url)
    metadata.set_attribute("tpu-env", "ACCELERATOR_TYPE: 'v3-8'\n")  # what Cloud TPU puts on its VMs
    run = {"args": ["--steps", "0"], "tpu": True, "run_dir": "gs://runs-bucket/runs/r9"}
    metadata.set_attribute(RUN_KEY, stub_spec("r9", **run))

    def log() -> str:  # the object `gantry logs` reads
        try:
            return gcs.read("gs://runs-bucket/runs/r9/logs/node-0.log").decode()
        except FileNotFoundError:
            return ""

    wait_until(lambda: "step 1 | games 3 | loss 0.5" in log(),
               what="the trainer's output in the bucket while it runs")
    assert "gantry-agent: started run r9" in log()
    assert "step 1 | games 3" in node.output()  # the serial port gets it as before
    metadata.set_attribute(RUN_KEY, stub_spec("r9", action="stop", **run))
    wait_until(lambda: "SIGTERM: checkpoint at step" in log(), what="the stop in the bucket")
    wait_until(lambda: node.report().get("state") == "stopped", what="the stopped report")


# ---- a TPU VM stops its own node (nodes:stop): powering its host off would not stop Cloud TPU's billing ----
TPU_NODE = "gantry-node-0"


def tpu_env(**keys: str) -> str:
    """The tpu-env attribute as Cloud TPU writes it: `KEY: 'value'` lines (agent.TPU_ENV_ATTRIBUTE)."""
    return "".join(f"{key}: '{value}'\n" for key, value in {"ACCELERATOR_TYPE": "v3-8", **keys}.items())


def start_tpu_node(nodes, tmp_path, metadata, apis, **settings) -> Node:
    return start_node(nodes, tmp_path, metadata, GANTRY_AGENT_TPU_URL=apis.endpoint, **settings)


def stop_requests(apis) -> list[str]:
    return [r for r in apis.requests if r.startswith("POST ") and r.endswith(":stop")]


def test_a_tpu_vm_past_max_run_hours_checkpoints_the_trainer_then_stops_its_own_node(tmp_path, metadata, apis,
                                                                                     nodes):
    # google_tpu_v2_vm has no run-duration limit: max_run_hours (GANTRY_MAX_RUN_HOURS in agent.env) is the agent's to
    # enforce, against the host's uptime (a file here, /proc/uptime on a VM) so a restarted agent does not reset it.
    tpu = apis.add_tpu_node(TPU_NODE, zone="us-central2-b", tpu_type="v4-8")
    uptime = tmp_path / "uptime"
    uptime.write_text("60.00 100.00\n")
    metadata.set_attribute("tpu-env", tpu_env(NODE_ID=TPU_NODE, ZONE="us-central2-b",
                                              CONSUMER_PROJECT_ID="demo-project", WORKER_ID="0"))
    node = start_tpu_node(nodes, tmp_path, metadata, apis, GANTRY_MAX_RUN_HOURS="0.1",  # 360 s
                          GANTRY_AGENT_UPTIME_FILE=str(uptime))
    metadata.set_attribute(RUN_KEY, stub_spec("r10", args=["--steps", "0"], tpu=True))
    wait_until(lambda: node.report().get("state") == "running" and (node.report().get("step") or 0) > 0,
               what="a running trainer")
    assert not stop_requests(apis)  # 60 s of 360: nothing to stop yet

    uptime.write_text("361.00 700.00\n")  # the node's time is up
    wait_until(lambda: tpu["state"] == "STOPPED", what="nodes:stop of the node")
    assert stop_requests(apis) == [f"POST /v2/projects/demo-project/locations/us-central2-b/nodes/{TPU_NODE}:stop"]
    # the trainer first, gracefully (docker stop = SIGTERM, the trainer checkpoints), then the node
    assert node.docker_calls("stop")[0][:3] == ["stop", "-t", "20"]
    assert "SIGTERM: checkpoint at step" in node.output()
    # The fake marks the node STOPPED before it answers; the agent logs the stop once it has the answer.
    node_stop = f"stopping TPU node projects/demo-project/locations/us-central2-b/nodes/{TPU_NODE}"
    log = wait_until(lambda: node_stop in node.agent_output() and node.agent_output(), what="the node stop's log line")
    assert log.index("stopping gantry-run-r10-0 (max_run_hours") < log.index(node_stop)
    wait_until(lambda: node.report().get("state") == "powering-off", what="the powering-off report")
    assert "max_run_hours is 0.1" in node.report()["detail"] and "--resume r10" in node.report()["detail"]
    time.sleep(2)  # two of the agent's loops
    assert len(node.docker_calls("run")) == 1, "the trainer must not start again once the node's time is up"
    assert not node.poweroff_marker.exists()  # the node, not the host


def test_an_idle_tpu_vm_stops_its_own_node(tmp_path, metadata, apis, nodes):
    # tpu-env names the node; the project and zone come from the metadata server's standard paths when it lacks them.
    tpu = apis.add_tpu_node(TPU_NODE, zone="us-central1-a")
    metadata.set_attribute("tpu-env", tpu_env(NODE_ID=TPU_NODE))
    node = start_tpu_node(nodes, tmp_path, metadata, apis, GANTRY_IDLE_SHUTDOWN_MINUTES="0.03")  # 1.8 s
    wait_until(lambda: tpu["state"] == "STOPPED", what="nodes:stop after idle_shutdown_minutes")
    assert stop_requests(apis) == [f"POST /v2/projects/demo-project/locations/us-central1-a/nodes/{TPU_NODE}:stop"]
    assert metadata.count("GET", "service-accounts/default/token")  # with the VM's own token
    wait_until(lambda: node.report().get("state") == "powering-off", what="the powering-off report")
    assert "idle_shutdown_minutes" in node.report()["detail"]
    assert not node.poweroff_marker.exists()  # powering the host off would not stop the TPU's billing


def test_a_tpu_api_refusal_is_one_line_naming_the_fix_and_the_agent_keeps_going(tmp_path, metadata, apis, nodes):
    # A node account without the role infra/iam.tf grants: Cloud TPU answers 403 (IAM's PERMISSION_DENIED body).
    tpu = apis.add_tpu_node(TPU_NODE, zone="us-central1-a")
    full = f"projects/demo-project/locations/us-central1-a/nodes/{TPU_NODE}"
    apis.errors[r":stop$"] = (403, error(403, "PERMISSION_DENIED", f"Permission 'tpu.nodes.stop' denied on '{full}'",
                                         reason="IAM_PERMISSION_DENIED", service="tpu.googleapis.com"))
    metadata.set_attribute("tpu-env", tpu_env(NODE_ID=TPU_NODE, ZONE="us-central1-a",
                                              CONSUMER_PROJECT_ID="demo-project"))
    node = start_tpu_node(nodes, tmp_path, metadata, apis, GANTRY_IDLE_SHUTDOWN_MINUTES="0.03",
                          GANTRY_AGENT_STOP_RETRY_SECONDS="2")
    wait_until(lambda: len(stop_requests(apis)) >= 2, what="nodes:stop tried again after the 403")
    lines = [line for line in node.agent_output().splitlines() if "could not stop TPU node" in line]
    assert lines and all(line == lines[0] for line in lines), lines
    assert lines[0] == (f"gantry-agent: could not stop TPU node {full}: HTTP 403 PERMISSION_DENIED: Permission "
                        f"'tpu.nodes.stop' denied on '{full}'; the node service account needs tpu.nodes.stop "
                        "(infra/iam.tf grants it when use_tpu: `make apply`); `make stop` stops it meanwhile; "
                        "retrying in 2 s")
    assert "Traceback" not in node.agent_output()
    assert node.process.poll() is None, "the agent must keep running"
    assert tpu["state"] == "READY" and not node.poweroff_marker.exists()

    del apis.errors[r":stop$"]  # the role granted (`make apply`): the next try stops the node
    wait_until(lambda: tpu["state"] == "STOPPED", what="the stop once permitted")
    wait_until(lambda: node.report().get("state") == "powering-off", what="the powering-off report")


def test_the_tpu_env_attribute_names_the_node():
    from gantry_agent.power import parse_tpu_env
    from gantry_agent.settings import TPU_NODE_KEY, TPU_PROJECT_KEY, TPU_ZONE_KEY

    env = parse_tpu_env("ACCELERATOR_TYPE: 'v4-8'\nCONSUMER_PROJECT_ID: 'my-proj'\nNODE_ID: 'my-node'\n"
                        "ZONE: 'us-central2-b'\nTOPOLOGY: '2x2x1'\nnot a key line\n")
    assert (env[TPU_PROJECT_KEY], env[TPU_ZONE_KEY], env[TPU_NODE_KEY]) == ("my-proj", "us-central2-b", "my-node")
    assert env["TOPOLOGY"] == "2x2x1"


def test_an_unreachable_tpu_api_is_one_line_and_the_stop_is_tried_again(tmp_path, metadata, capsys):
    """No network to Cloud TPU (a closed port here): power_off answers False, so its caller tries again later."""
    from gantry_agent.agent import Agent
    from gantry_agent.settings import Settings

    agent = Agent(Settings({"GANTRY_METADATA_URL": metadata.url, "GANTRY_AGENT_TPU_URL": "http://127.0.0.1:9",
                            "GANTRY_AGENT_SERIAL": str(tmp_path / "serial"), "GANTRY_AGENT_STATE_DIR": str(tmp_path)}))
    agent.on_tpu, agent.tpu_env = True, {"NODE_ID": TPU_NODE}  # the project and zone from the metadata server
    assert agent.power_off("no run for 60.0 min (idle_shutdown_minutes)") is False
    assert not agent.powered_off and agent.m.state == "error"
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "could not stop TPU node" in line]
    assert line.startswith(f"gantry-agent: could not stop TPU node projects/demo-project/locations/us-central1-a/"
                           f"nodes/{TPU_NODE}: ")
    assert line.endswith("; `make stop` stops it meanwhile; retrying in 300 s")
