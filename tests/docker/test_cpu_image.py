"""The CPU image, built from docker/Dockerfile and run for real: what it holds, how it refuses a
GPU job it cannot do, one container training and stopping, and two containers training as two nodes.

Each run uses a tic-tac-toe config with a few-second checkpoint interval and stops on `docker stop`,
as a Spot preemption or `make stop` would stop it: exit 0 and a final checkpoint in the mounted runs dir.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from checkout import REPO
from docker_helpers import checkpoints, docker, free_port, logs, runs_dir, trained_checkpoints, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Small and quick: one actor per node, a checkpoint every 3 s, no evaluation.
TICTACTOE = ["--config", "tictactoe", "--actors.count=1", "--eval.every_minutes=0",
             "--run.checkpoint_every_minutes=0.05", "--run.log_every_seconds=1"]


FINISHED = re.compile(r"rank (\d+) finished at step (\d+), weights checksum (-?[\d.]+)")


def stop_and_wait(name: str) -> int:
    """`docker stop` (SIGTERM, then SIGKILL after 120 s) and the container's exit code."""
    docker("stop", "-t", "120", name, timeout=300)
    return int(docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip())


def test_cpu_image_holds_cpu_torch_and_the_trainer_only(cpu_image):
    script = ("import json, torch; from importlib import metadata; "
              "names = sorted(d.metadata['Name'].lower() for d in metadata.distributions()); "
              "print(json.dumps({'cuda': torch.version.cuda, 'torch': torch.__version__, 'dists': names}))")
    result = docker("run", "--rm", cpu_image, "sh", "-c", f'id -u; python -c "{script}"')
    uid, report = result.stdout.strip().splitlines()[-2:]
    facts = json.loads(report)
    assert uid == "1000", "the image must run as its non-root user"
    assert facts["cuda"] is None and "+cpu" in facts["torch"], facts["torch"]
    assert not [d for d in facts["dists"] if d.startswith("nvidia-") or d == "triton"], facts["dists"]
    # The trainer's distribution without the launcher's extras (cloud, dev): no Docker SDK, Terraform
    # wrapper, Compute client or test tools in the image.
    assert "gantry" in facts["dists"]
    assert not {"docker", "python-terraform", "google-cloud-compute", "pytest", "ruff"} & set(facts["dists"])


def test_cpu_image_refuses_to_start_when_cuda_is_required(cpu_image, tmp_path):
    runs = runs_dir(tmp_path)
    result = docker("run", "--rm", "-e", "GANTRY_REQUIRE_CUDA=1", "-v", f"{runs}:/runs", cpu_image,
                    "--config", "tictactoe", "--run.dir=/runs/never", check=False)
    assert result.returncode == 1
    assert "gantry: error: this torch" in result.stderr and "has no CUDA" in result.stderr, result.stderr
    assert not (runs / "never").exists(), "training must not start after a failed CUDA check"


def test_single_container_trains_checkpoints_and_stops_cleanly(cpu_image, containers, tmp_path):
    runs = runs_dir(tmp_path)
    name = containers(cpu_image, "train", *TICTACTOE, "--run.dir=/runs/single", volumes={runs: "/runs"})
    run = runs / "single"
    first = wait_for(lambda: trained_checkpoints(run), "checkpoint after a learner step", [name])
    stop_requested = time.time()
    assert stop_and_wait(name) == 0, logs(name)[-3000:]
    newest = checkpoints(run)[-1]
    assert newest.stat().st_mtime >= stop_requested - 1, "no final checkpoint written on SIGTERM"
    assert newest.name >= first[-1].name
    assert (run / "stats.jsonl").is_file()
    assert FINISHED.search(logs(name)), logs(name)[-3000:]


def test_the_kits_trainer_runs_as_a_nodes_agent_starts_it_and_checkpoints_into_its_sync_folder(cpu_image, tmp_path):
    """The joint between the agent and the image: the `docker run` of a one-node launch of the kit's gantry.yaml
    (gantry_agent.containers.docker_run_args), the run folder handed to the image's user as the agent hands it,
    then `docker stop` with the grace a node with --sync folders gives: the checkpoints land in the host folder the
    agent copies to the bucket. (In-process on one node, the trainer's actors once took the container's PID 1 for
    a dead parent and played no game.)"""
    from gantry.launches import program_file
    from gantry_agent.containers import Docker, docker_run_args
    from gantry_agent.settings import Settings
    from gantry_agent.sync import local_folder
    from launch_contract import RunSpec, sync_stop_grace

    kit = program_file.load(program_file.KIT_ROOT)
    spec = RunSpec(run_id="kit", image=cpu_image, node_rank=0, nnodes=1, master_addr="127.0.0.1", command=True,
                   args=(*kit.command, *TICTACTOE), sync=kit.sync, stats_file=kit.stats, launched_at="1")
    run_folder = runs_dir(tmp_path)
    os_folder = Path(local_folder(str(run_folder), kit.sync[0]))
    os_folder.mkdir(parents=True)
    agent = Docker(["docker"])
    agent.prepare_run_folder(str(run_folder), cpu_image)
    args = docker_run_args(spec, str(run_folder), Settings({"GANTRY_AGENT_SHM_SIZE": "512m"}), agent.workdir(cpu_image))
    try:
        docker(*args, timeout=600)
        first = wait_for(lambda: trained_checkpoints(os_folder), "a checkpoint after a learner step", [spec.container])
        stop_requested = time.time()
        docker("stop", "-t", str(sync_stop_grace()), spec.container, timeout=300)
        assert docker("inspect", "-f", "{{.State.ExitCode}}", spec.container).stdout.strip() == "0"
        newest = checkpoints(os_folder)[-1]
        assert newest.stat().st_mtime >= stop_requested - 1 and newest.name >= first[-1].name
        assert (os_folder / "stats.jsonl").is_file() and FINISHED.search(logs(spec.container))
    finally:
        docker("rm", "-f", spec.container, check=False)


def test_the_trainer_as_the_containers_pid_1_plays(cpu_image, tmp_path):
    """`docker run IMAGE` without --init, as a user may start it: the trainer is PID 1 and its spawned actors must
    not take that for an orphaned parent (selfplay.actors.die_with_parent)."""
    runs = runs_dir(tmp_path)
    result = docker("run", "--rm", "--network", "host", "--shm-size", "512m", "-v", f"{runs}:/runs", cpu_image,
                    "train", *TICTACTOE, "--run.max_steps=2", "--run.max_minutes=2", "--run.dir=/runs/pid1",
                    timeout=300)
    assert re.search(r"rank 0 finished at step 2,", result.stdout), result.stdout[-3000:]


def test_two_containers_rendezvous_over_gloo_train_and_stop(cpu_image, containers, tmp_path):
    runs = runs_dir(tmp_path)
    port = free_port()
    rendezvous = {"NNODES": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NPROC_PER_NODE": "1"}
    args = [*TICTACTOE, "--run.dir=/runs/two", "--dist.backend=gloo", "--dist.timeout_s=300"]
    # Each node mounts its own runs folder, as two VMs would have: only rank 0 may write there.
    node_runs = [runs / "node0", runs / "node1"]
    for d in node_runs:
        d.mkdir()
        d.chmod(0o777)
    # No command: the image's entry point runs `selfplay launch`, torchrun with the rendezvous from the env.
    master = containers(cpu_image, *args, env={**rendezvous, "NODE_RANK": "0"}, volumes={node_runs[0]: "/runs"})
    worker = containers(cpu_image, *args, env={**rendezvous, "NODE_RANK": "1"}, volumes={node_runs[1]: "/runs"})
    run = node_runs[0] / "two"
    wait_for(lambda: trained_checkpoints(run), "checkpoint after a learner step from rank 0", [master, worker])
    assert "rank 0/2 (gloo)" in logs(master), logs(master)[-3000:]

    stop_requested = time.time()
    docker("stop", "-t", "120", master, worker, timeout=300)  # both nodes at once, as `make stop` does
    codes = [int(docker("inspect", "-f", "{{.State.ExitCode}}", n).stdout) for n in (master, worker)]
    both_logs = logs(master)[-3000:] + "\n----\n" + logs(worker)[-3000:]
    assert codes == [0, 0], both_logs
    assert checkpoints(run)[-1].stat().st_mtime >= stop_requested - 1, "no final checkpoint after docker stop"
    assert not (node_runs[1] / "two").exists() or not checkpoints(node_runs[1] / "two"), "only rank 0 writes"

    # Every rank prints its last step and a checksum of its weights: DDP keeps them identical.
    finished = {}
    for name in (master, worker):
        found = FINISHED.findall(logs(name))
        assert found, f"{name} printed no 'finished at step' line:\n{both_logs}"
        finished.update({int(rank): (int(step), checksum) for rank, step, checksum in found})
    assert set(finished) == {0, 1}, finished
    assert finished[0] == finished[1], f"ranks diverged: {finished}"
    assert finished[0][0] > 0, "no learner step was taken"


def test_cuda_dockerfile_builds_to_torch_and_refuses_a_cpu_torch(docker_client):
    """No CUDA wheels can be had here, so the CUDA image is built as far as torch with the local CPU
    wheel forced in: the engine accepts every step before it, and the flavour guard must fail the build."""
    from docker_helpers import LOCAL_BASE
    from gantry import images

    wheels = [w for w in (images.default_wheel_dir() or REPO).glob("torch-*+cpu*.whl")]
    if not wheels:
        pytest.skip("no local +cpu torch wheel to force into the CUDA build (GANTRY_WHEEL_DIR)")
    args = {"FLAVOUR": "cuda", **({"BASE_IMAGE": LOCAL_BASE} if docker_client.images.list(name=LOCAL_BASE) else {})}
    with images.build_context(REPO, "docker/Dockerfile", wheels[:1], images.default_ca_certs()) as context:
        chunks = list(docker_client.api.build(fileobj=context, custom_context=True, dockerfile="docker/Dockerfile",
                                              tag="gantry-trainer:test-cuda-guard", buildargs=args, decode=True,
                                              rm=True, forcerm=True, network_mode="host"))
    output = "".join(c.get("stream", "") for c in chunks)
    errors = [c["error"] for c in chunks if "error" in c]
    steps = re.findall(r"---> ([0-9a-f]{12})\b", output)
    if steps:  # the failed build's last layer and its untagged parents: no use as a cache, ~350 MB on vfs
        docker("rmi", steps[-1], check=False)
    assert errors, "the CUDA build must not succeed with a CPU torch"
    assert "install_torch: the CUDA image got a CPU-only torch" in output + "".join(errors), output[-3000:]


def test_the_local_base_holds_the_shared_libpython_that_torch_xla_links_against(local_base):
    """The TPU image's build imports torch_xla, whose _XLAC needs libpython3.11.so.1.0: python:3.11-slim has it,
    Debian's python3 alone does not, so scripts/docker_base.sh installs it (a base without it fails that build)."""
    found = docker("run", "--rm", local_base, "python3", "-c",
                   "import ctypes, sys; ctypes.CDLL('libpython3.11.so.1.0'); print(sys.version_info[:2])", check=False)
    assert found.returncode == 0 and found.stdout.strip() == "(3, 11)", found.stdout + found.stderr


def test_make_train_docker_trains_in_the_cpu_image_into_its_own_run_folder(cpu_image):
    """DOCKER.md's `make train-docker TRAIN_CONFIG=tictactoe ARGS=...` as typed (the run folder under the checkout's
    runs/, which the recipe mounts, named so that it cannot meet another run): train-local's runs/local untouched."""
    import shutil
    import subprocess
    import uuid

    from suite_make import clean_environ

    folder = REPO / "runs" / f"test-train-docker-{uuid.uuid4().hex[:8]}"
    local = REPO / "runs" / "local"
    before = sorted(local.iterdir()) if local.is_dir() else None
    try:
        made = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "train-docker", f"TRAIN_IMAGE={cpu_image}",
                               "TRAIN_CONFIG=tictactoe", f"TRAIN_RUN_DIR=runs/{folder.name}",
                               "ARGS=--run.max_steps=2 --actors.count=1 --eval.every_minutes=0"],
                              capture_output=True, text=True, timeout=600, check=False, env=clean_environ(), stdin=subprocess.DEVNULL)
        assert made.returncode == 0, made.stdout[-3000:] + made.stderr
        assert [p.name for p in trained_checkpoints(folder)] == ["ckpt-000000002.pt"], made.stdout[-3000:]
        assert FINISHED.search(made.stdout), made.stdout[-3000:]
        assert (sorted(local.iterdir()) if local.is_dir() else None) == before
    finally:
        shutil.rmtree(folder, ignore_errors=True)
