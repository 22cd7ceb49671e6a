"""The user's cloud journey as one piece, against the local cloud a user starts with `make local-cloud`.

    make local-cloud -> make cost -> make preflight -> make build-train -> make apply -> make push-train ->
    make run-gcp -> make status / logs -> make preempt, healed by make status -> make stop -> make fetch ->
    make run-gcp --resume -> make run-gcp -- -m toytrain.train -> make destroy

One test walks every phase, so the image is built and pushed and the nodes boot once (each boot is minutes). The
own-project block of the README runs through make itself in test_local_cloud.py.

Real here: the terraform binary (apply and destroy of the local cloud's deployment, whose startup script Terraform
renders from infra/modules/startup_script), `gantry build` building docker/Dockerfile and pushing it to a real
registry server (Debian's docker-registry), that script run as root on each "VM", the node agent it installs from
instance metadata, the Docker engine, the trainer image and torchrun's rendezvous between two containers over
loopback. Only Google stands in (packages/local_cloud): the Compute API, driven by the real google-cloud-compute
client, each VM's metadata server, the REST APIs preflight and destroy ask, and Cloud Storage (fake-gcs-server:
gantry's, the trainer's and the agent's own clients read and write gs://BUCKET through its JSON API).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from contextlib import ExitStack

import pytest
from agent_helpers import wait_until
from gantry.launches import program_file
from gantry.status import ExitStatus
from gantry_agent.outputs import stats_figures
from launch_contract import ENDED, EndRecord, RunSpec, sync_url
from launcher_helpers import needs_terraform
from local_cloud.cloud import CONTAINER_LABEL
from node_twin import TwinDeployment, free_port, readme_walkthrough
from runs_helpers import metadata_items
from selfplay.record_keys import END_KIND, KIND_KEY, STATS_FILE

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.terraform, needs_terraform,
              pytest.mark.timeout(1800)]

NAMES = ["gantry-node-0", "gantry-node-1"]
BASE_IMAGE = "gantry-base:bookworm"  # scripts/docker_base.sh: no registry to pull python:3.11-slim from
# A tiny Connect Four: one actor per node, a checkpoint every 6 s, Pons evaluation every 12 s on 10 positions.
TRAINER = ["--model.channels=8", "--model.blocks=1", "--actors.count=1", "--actors.games=16",
           "--search.simulations=8", "--learner.batch_size=32", "--learner.min_replay=64",
           "--eval.every_minutes=0.2", "--eval.positions_per_set=10", "--eval.simulations=4",
           "--run.checkpoint_every_minutes=0.1", "--run.log_every_seconds=2", "--dist.timeout_s=180"]
NO_EVAL = [*(flag for flag in TRAINER if not flag.startswith("--eval.every_minutes=")), "--eval.every_minutes=0"]
# What the twin adds to the README's run: a free port, and copies to the bucket every 3 s instead of 120.
TWIN_RUN = ["--sync-every", "3"]
# The trainer's run folder on node 0 (the kit's gantry.yaml's sync folder), as its agent keeps it in the bucket.
(TRAINER_FOLDER,) = program_file.load(program_file.KIT_ROOT).sync
TRAINER_DIR = sync_url("runs/twin", 0, TRAINER_FOLDER)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def engine():
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        pytest.skip("no Docker engine answers `docker info` (CI starts one: scripts/ci-setup.d/20-docker.sh)")
    if docker("image", "inspect", BASE_IMAGE).returncode != 0:
        pytest.skip(f"no {BASE_IMAGE} (scripts/docker_base.sh makes it)")
    if subprocess.run(["which", "docker-registry"], capture_output=True, check=False).returncode != 0:
        pytest.skip("docker-registry is not installed (scripts/ci-setup.d/20-docker.sh installs it)")


def steps_in(names) -> list[int]:
    """The steps of the checkpoints among a folder's file names (the bucket's, or os.listdir's)."""
    return sorted(int(m.group(1)) for name in names if (m := re.fullmatch(r"ckpt-(\d+)\.pt", name)))


def test_the_cloud_journey_end_to_end(engine, cli, deployment, monkeypatch):
    """`make local-cloud`, then the README's walkthrough block in its order (readme_walkthrough), every step of it,
    with what a run meets on the way: a run before the push, a second run, a Spot preemption, make stop, a resume
    that ends by the default time budget, your own torchrun program; make destroy last."""
    from gantry.launches import programs

    began = time.monotonic()
    walkthrough = readme_walkthrough()
    readme_args = dict(walkthrough)
    ran: list[str] = []  # the verbs that succeeded, in order: the README's must be among them in its order

    def gantry(*argv: str, **kwargs):
        result = cli(*argv, **kwargs)
        if result.status == ExitStatus.OK:
            ran.append(argv[0])
        return result

    def phase(what: str) -> None:  # shown with -s and on failure: where the minutes go
        print(f"[node twin {time.monotonic() - began:5.0f} s] {what}", flush=True)

    with ExitStack() as stack:
        # make local-cloud: from here on every verb talks to it, and says so
        twin = TwinDeployment(stack, deployment.root, nodes=len(NAMES))
        environ, outputs, cloud = twin.environ, twin.outputs, twin.cloud
        priced = gantry("cost", *readme_args["cost"])
        assert priced.status == ExitStatus.OK and "2 nodes in total" in priced.stdout, priced.output
        assert "the local cloud bills none of it; on Google Cloud the same deployment would cost:" in priced.stdout
        assert "gantry: local cloud: 2 node(s) on this machine, bills nothing" in priced.stderr, priced.stderr
        checked = gantry("preflight", *readme_args["preflight"])
        assert checked.status == ExitStatus.OK and "Ready" in checked.stdout, checked.output
        phase("the local cloud is up; cost and preflight asked it")

        # make build-train ARGS=--no-push, as the README has it: the image is built before anything bills
        before = docker("image", "inspect", "--format", "{{.Id}}", "gantry-trainer:cpu").stdout.strip()
        built = gantry("build", *readme_args["build"], "--base-image", BASE_IMAGE)
        if before and before != docker("image", "inspect", "--format", "{{.Id}}", "gantry-trainer:cpu").stdout.strip():
            docker("image", "rm", before)  # the last run's image, now untagged: gigabytes on vfs storage
        assert built.status == ExitStatus.OK, built.output[-3000:]
        assert "--no-push" in readme_args["build"] and "Not pushed" in built.stdout, built.stdout[-2000:]
        phase("built, not pushed")

        # make apply: terraform apply of the local cloud's deployment creates the Spot VMs; each boots (startup
        # script as root -> docker login with the metadata token -> the agent as a unit)
        applied = gantry("apply", *readme_args["apply"], answer="y")
        assert applied.status == ExitStatus.OK, applied.output[-3000:]
        assert "Billing: none" in applied.stdout and "Create its nodes here? [y/N]" in applied.stdout, applied.stdout
        vms, nodes = twin.vms, twin.nodes
        assert [vm["name"] for vm in vms] == NAMES
        wait_until(lambda: all(vm["guestAttributes"].get("gantry/boot") == "ready" for vm in vms), timeout=300,
                   what=f"both nodes to boot; node 0 said:\n{cloud.boot_output(0)[-3000:]}")
        phase("the deployment is applied and both nodes booted")

        # make run-gcp before the image is pushed: refused with the fix, no node touched
        early = gantry("run", "--detach", "--run-id", "twin", environ=environ)
        assert early.status == ExitStatus.ERROR and "is not in the registry. Run `make build-train`" in early.stderr
        assert all("gantry-run" not in metadata_items(vm) for vm in vms)
        phase("run-gcp before the push was refused")

        # make push-train: the image built before apply goes to the registry apply created
        pushed_now = gantry("push", *readme_args["push"], environ=environ)
        assert pushed_now.status == ExitStatus.OK, pushed_now.output[-3000:]
        pushed = re.search(r"Pushed (\S+@sha256:[0-9a-f]{64})\.", pushed_now.stdout).group(1)
        assert pushed.startswith(f"{outputs['image_repository_url']}/gantry-trainer@")
        phase("pushed")

        port = str(free_port())
        started = gantry("run", "--detach", "--run-id", "twin", "--master-port", port, *TWIN_RUN,
                         "--", "--config", "connect4", *TRAINER, environ=environ)  # the kit's gantry.yaml's command
        assert started.status == ExitStatus.OK, started.output
        wait_until(lambda: all(n.report().get("state") == "running" for n in nodes), timeout=300,
                   what=f"both agents to run the trainer; node 0's agent said:\n{nodes[0].agent_output()[-3000:]}")
        phase("both agents run the trainer")
        for rank in range(2):  # the containers run the digest that was pushed, as the trainer's non-root user
            facts = docker("inspect", "--format", "{{.Config.Image}} {{.Config.User}}", f"gantry-run-twin-{rank}")
            assert facts.stdout.split() == [pushed, "1000:1000"], facts.stdout + facts.stderr

        def evaluated():
            status = gantry("status", environ=environ)
            return status if "Pons MCTS weak errors at step" in status.stdout else None

        status = wait_until(evaluated, timeout=600, interval=5,
                            what=f"a Pons evaluation in the bucket; node 0 said:\n{nodes[0].output()[-3000:]}")
        phase("status shows a Pons evaluation")
        print(status.stdout, flush=True)  # what a user sees: with -s, the closing notes quote it
        row0, row1 = status.stdout.splitlines()[1:3]
        assert row0.split()[:4] == ["0", "gantry-node-0", "running", "twin"] and int(row0.split()[4]) > 0
        assert row1.split()[:4] == ["1", "gantry-node-1", "running", "twin"] and row0.split()[-1] == "$0.00"
        assert re.search(r"Begin-Hard \d+\.\d%", status.stdout) and "node 0: step" in status.stdout
        assert "launch: node 0/2" in gantry("logs", *readme_args["logs"], environ=environ).stdout

        # a second make run-gcp does not silently replace the run in progress
        second = gantry("run", "--detach", "--run-id", "other", environ=environ)
        assert second.status == ExitStatus.ERROR and "run twin on node(s) 0, 1" in second.stderr

        phase("a second run-gcp was refused")
        # make preempt NODE=1, a Spot preemption of node 1: its agent gets SIGTERM and the 30 s notice, then the VM is
        # TERMINATED. Node 0's trainer loses its peer and its agent restarts it; make status starts the stopped Spot
        # VM, it boots again, and both ranks resume from the run's newest checkpoint and train on.
        run_dir = TRAINER_DIR
        before = steps_in(twin.names(run_dir))[-1]
        said = cloud.preempt(1)
        assert said.startswith("preempted node 1 (gantry-node-1, run twin): SIGTERM") and vms[1]["status"] == \
            "TERMINATED", said
        healed = gantry("status", environ=environ)
        assert healed.status == ExitStatus.OK, healed.output
        assert "Spot VM TERMINATED during run twin: starting it;" in healed.stdout, healed.output
        assert cloud.compute.started == ["gantry-node-1"] and vms[1]["status"] == "RUNNING"
        wait_until(lambda: "resumed from" in nodes[0].output() and steps_in(twin.names(run_dir))[-1] > before,
                   timeout=600, interval=3, what=f"both ranks to resume after the preemption; node 0 said:\n"
                                    f"{nodes[0].output()[-3000:]}\nnode 1 said:\n{nodes[1].output()[-3000:]}")
        resumed_at = int(re.search(r"resumed from \S+ at step (\d+)", nodes[0].output()).group(1))
        assert resumed_at >= before  # from the newest checkpoint, not from scratch
        wait_until(lambda: all(n.report().get("state") == "running" for n in nodes), timeout=120,
                   what="both agents to report the trainer running again")

        phase("a preempted Spot node was restarted and the run resumed")
        # make stop: both nodes stop at the same step, with a final checkpoint in the bucket
        stopped = gantry("stop", "-y", "--timeout", "300", environ=environ)
        assert stopped.status == ExitStatus.OK, stopped.output + nodes[0].output()[-3000:]
        stopped_at = steps_in(twin.names(run_dir))[-1]
        for rank, node in enumerate(nodes):
            assert f"rank {rank} finished at step {stopped_at}," in node.output(), node.output()[-3000:]

        phase("stopped")
        # make fetch: checkpoints, stats and TensorBoard events, readable here
        fetched = gantry("fetch", "twin", environ=environ)
        assert fetched.status == ExitStatus.OK, fetched.output
        local = deployment.root / TRAINER_DIR
        assert steps_in(os.listdir(local))[-1] == stopped_at
        records = [json.loads(line) for line in (local / "stats.jsonl").read_text().splitlines()]
        assert any(r["kind"] == "eval" for r in records)
        assert list((local / "tb").glob("events.out.tfevents.*")), "TensorBoard events came home"

        phase("fetched")
        # make run-gcp --resume: both nodes continue from the stopped step and end by themselves before the default
        # time limit every launch gets (the mechanism of every run; only its length is the test's): the agents hand the
        # trainer the launch's deadline, and it plans its own end before it
        # and it resumes with two ranks on each node (a GPU node's layout: one rank per GPU), four in one group; on two
        # cores four ranks leave no room for the periodic evaluation's processes, so this session has none
        monkeypatch.setattr(programs, "DEFAULT_RUN_MAX_MINUTES", 1.5)
        resumed = gantry("run", "--detach", "--resume", "twin", "--master-port", port, *TWIN_RUN, "--nproc-per-node",
                         "2", "--", "--config", "connect4", *NO_EVAL, environ=environ)
        assert resumed.status == ExitStatus.OK, resumed.output
        assert RunSpec.from_json(metadata_items(vms[1])["gantry-run"]).image == pushed
        wait_until(lambda: all(n.report().get("state") == "finished" for n in nodes), timeout=600, interval=2,
                   what=f"the resumed run to finish; node 0 said:\n{nodes[0].output()[-3000:]}")
        assert f"at step {stopped_at} " in nodes[0].output()  # "resumed from ckpt-... at step N (...)"
        final = steps_in(twin.names(run_dir))[-1]
        assert final >= stopped_at
        assert all(f"launch: node {n}/2, 2 rank(s) here" in nodes[n].output() for n in range(2))
        for rank in range(4):  # ranks 0, 1 on node 0 and 2, 3 on node 1, all at the same step
            assert f"rank {rank} finished at step {final}," in nodes[rank // 2].output(), nodes[rank // 2].output()[-3000:]
        # the budget ended it, not a step count or a signal (the first session ended by make stop's SIGTERM)
        records = [json.loads(line) for line in twin.read(f"{run_dir}/{STATS_FILE}").decode().splitlines()]
        ends = [r for r in records if r.get(KIND_KEY) == END_KIND]
        assert [r.get("reason") for r in ends] == ["max_minutes"], ends
        assert "time limit: the launch ends at" in nodes[0].output()
        left_off(cli, twin)
        phase("the resumed run ended by itself before its time limit on both nodes; status started no node")

        # make run-gcp -- -m toytrain.train: your own torchrun program on the same nodes, once the run is done
        your_own_torchrun_program(cli, twin, nodes, pushed, stack)
        phase("your own torchrun program ran on both nodes")

        # make destroy: terraform destroy deletes the nodes (each agent shut down); the bucket holds the runs, so the
        # google provider's rule keeps it (force_destroy = false), and the inventory says so
        destroyed = gantry("destroy", *readme_args["destroy"], answer="y")
        assert destroyed.status == ExitStatus.OK, destroyed.output[-3000:]
        assert f"Kept: bucket {twin.bucket_url} with the run data" in destroyed.stdout, destroyed.stdout[-3000:]
        assert cloud.vms == [] and cloud.compute.instances == []
        assert docker("ps", "-aq", "--filter", f"label={CONTAINER_LABEL}").stdout.split() == []
        phase("destroyed: no node, no container; the bucket kept")

    # every README step, taken in the README's order
    expected = [verb for verb, _ in walkthrough]
    remaining = iter(ran)
    assert all(verb in remaining for verb in expected), f"README order {expected}, the twin ran {ran}"


def left_off(cli, twin) -> None:
    """After a launch ended on both nodes (each agent wrote its EndRecord), the Spot VMs stop (max_run_hours, the
    agent's idle power-off): `make status`, run again and again, starts none of them. Then they are up again, as
    the twin's agents never stopped."""
    started = list(twin.cloud.compute.started)
    for vm in twin.vms:
        vm["status"] = "TERMINATED"
    for rank in range(2):
        ended = EndRecord.from_json(twin.read(f"runs/twin/{ENDED.format(rank=rank)}"))
        # the trainer ends itself before the deadline; on a loaded machine its final save may still run when the
        # deadline comes, and the agent's SIGTERM ends it (the trainer's own end record is in either way)
        assert ended is not None and ended.reason in ("exited", "time-limit"), ended
    for _ in range(3):
        status = cli("status", environ=twin.environ)
        assert status.status == ExitStatus.OK, status.output
        assert twin.cloud.compute.started == started and "starting it" not in status.stdout, status.stdout
        assert status.stdout.count("terminated, left off: run twin ") == 2, status.stdout
    print(status.stdout, flush=True)
    for vm in twin.vms:
        vm["status"] = "RUNNING"


def your_own_torchrun_program(cli, twin, nodes, pushed, stack) -> None:
    """gantry run --nproc-per-node 2 -- -m toytrain.train on the nodes the journey booted: a package of packages/ in the
    trainer image, under torchrun with two ranks on each node, meeting over gloo at node 0, its output in the bucket
    and its step in gantry status. (Part of the one journey, so that the image is built and the nodes booted once.)"""
    from gantry.launches import fetch

    for rank in range(2):
        stack.callback(subprocess.run, ["docker", "rm", "-f", f"gantry-run-toy-{rank}"], capture_output=True,
                       timeout=300, check=False)
    steps = 24  # a pause per step, so that status sees the program at work
    started = cli("run", "--detach", "--run-id", "toy", "--master-port", str(free_port()), *TWIN_RUN, "--sync", "out",
                  "--stats", "out/stats.jsonl", "--nproc-per-node", "2", "--", "-m", "toytrain.train", f"--steps={steps}",
                  "--sleep-s=0.5", "--checkpoint-every=8", environ=twin.environ)
    assert started.status == ExitStatus.OK, started.output
    assert "Program: torchrun -m toytrain.train" in started.stdout

    def working():
        status = cli("status", environ=twin.environ)
        row0 = status.stdout.splitlines()[1].split()
        return status if row0[2:4] == ["running", "toy"] and row0[4] != "-" else None

    status = wait_until(working, timeout=300, interval=2,
                        what=f"status to show the program's step; node 0 said:\n{nodes[0].output()[-3000:]}"
                             f"\nits agent:\n{nodes[0].agent_output()[-3000:]}")
    assert 0 < int(status.stdout.splitlines()[1].split()[4]) <= steps
    assert "node 0: step" in status.stdout and "| loss " in status.stdout
    assert "Pons" not in status.stdout  # the selfplay trainer's figures are not this program's

    wait_until(lambda: all(n.report().get("state") == "finished" for n in nodes), timeout=300, interval=2,
               what=f"the program to finish on both nodes; node 0 said:\n{nodes[0].output()[-3000:]}"
                    f"\nnode 1 said:\n{nodes[1].output()[-3000:]}")
    status = cli("status", environ=twin.environ)
    for rank, row in enumerate(status.stdout.splitlines()[1:3]):
        assert row.split()[:4] == [str(rank), NAMES[rank], "finished", "toy"], status.stdout
    assert status.stdout.splitlines()[1].split()[4] == str(steps)
    # two ranks a node (a GPU node's default: one per GPU), four in one process group; the command sees the node's GPUs
    assert "toytrain: 4 rank(s) over gloo, 2 per node (GANTRY_GPUS_PER_NODE=0)" in nodes[0].output()
    for rank in range(2):  # torchrun as the entry point, in the image that was pushed
        facts = docker("inspect", "--format", "{{json .Config.Entrypoint}} {{.Config.Image}}",
                       f"gantry-run-toy-{rank}")
        assert facts.stdout.split() == ['["torchrun"]', pushed], facts.stdout + facts.stderr

    home = twin.tmp_path / "toy-home"  # node 0's --sync folder, copied by its agent: what make fetch brings home
    fetch(f"{twin.bucket_url}/runs/toy", str(home))
    out = home / sync_url("", 0, "out").lstrip("/")
    assert stats_figures((out / "stats.jsonl").read_text())[0] == steps
    assert (out / "ckpt.pt").is_file()
