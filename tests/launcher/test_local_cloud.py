"""The local cloud as a user drives it, through make: `make local-cloud`, `make apply`, the README's own-project block
(a project that knows nothing of Gantry: built, run with its checkpoints synced, fetched), `make preempt NODE=1` in
the middle, `make destroy` and `make local-cloud-down`, leaving no container, process or port behind. And what bad
input gets: one line, a non-zero exit, nothing started.

The world's folder is the test's own (GANTRY_LOCAL_CLOUD_DIR), never the checkout's .local-cloud/, which the other
tests' make targets would otherwise find and talk to.
"""

from __future__ import annotations

import fnmatch
import io
import json
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from agent_helpers import wait_until
from checkout import REPO
from gantry.cli import Environment, main
from gantry.local_world import FOLDER_ENV, WORLD_FILE, LocalWorld, alive
from launcher_helpers import NotATerminal, needs_terraform
from local_cloud.cloud import CONTAINER_LABEL, ZONE
from node_twin import OWN_PROJECT_MARK, readme_make_lines
from suite_make import MAKE, clean_environ

BASE_IMAGE = "gantry-base:bookworm"  # scripts/docker_base.sh: no registry to pull python:3.11-slim from
# What the test adds to the README's own-project run: it returns at once, a run id, copies every 3 s instead of 120;
# and small games (the program's own flags, after the README's: argparse takes the last).
CHESS_RUN = "--detach --run-id chess --sync-every 3"
CHESS_FLAGS = "--games-per-iter 2 --max-plies 30 --workers 1 --iterations 100000"


def make(env: dict, *words: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*MAKE, *words], env=env, capture_output=True, text=True, timeout=timeout, check=False)


def docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def world(tmp_path) -> tuple[dict, Path]:
    """A user's shell whose local cloud lives in the test's folder; whatever the test leaves up is taken down."""
    folder = tmp_path / "local-cloud"
    env = {**clean_environ(), FOLDER_ENV: str(folder)}
    yield env, folder
    if (folder / WORLD_FILE).exists():
        make(env, "local-cloud-down")


def listening(url: str) -> bool:
    where = urlsplit(url)
    try:
        with socket.create_connection((where.hostname, where.port), timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.terraform
@needs_terraform
@pytest.mark.timeout(1500)
def test_a_user_rehearses_their_own_project_on_the_local_cloud_through_make(world, tmp_path):
    env, folder = world
    if docker("info").returncode != 0:
        pytest.skip("no Docker engine answers `docker info` (CI starts one: scripts/ci-setup.d/20-docker.sh)")
    if docker("image", "inspect", BASE_IMAGE).returncode != 0:
        pytest.skip(f"no {BASE_IMAGE} (scripts/docker_base.sh makes it)")
    if shutil.which("docker-registry") is None:
        pytest.skip("docker-registry is not installed (scripts/ci-setup.d/20-docker.sh installs it)")
    build, run, fetch = readme_make_lines(OWN_PROJECT_MARK)
    assert [words[1] for words in (build, run, fetch)] == ["build-train", "run-gcp", "fetch"]
    began, timings = time.monotonic(), []

    def step(*words: str, ok: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        started = time.monotonic()
        done = make(env, *words, timeout=timeout)
        timings.append(f"{' '.join(words)[:70]}: {time.monotonic() - started:.1f} s")
        if ok:
            assert done.returncode == 0, f"make {' '.join(words)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    up = step("local-cloud", "NODES=2")
    assert "2 Spot node(s) as containers on this machine" in up.stdout and "It bills nothing." in up.stdout
    cloud = LocalWorld(**json.loads((folder / WORLD_FILE).read_text()))

    # faults on demand: a quota Google would refuse blocks at preflight, creating nothing; a stock-out in the zone
    # moves the nodes to the first of fallback_zones, as on Google
    assert "quotas are 8 vCPUs now" in step("fault", "FAULT=quota").stdout
    short = step("apply", "ARGS=-y", ok=False)
    assert short.returncode != 0 and "blocker(s); nothing was created" in short.stderr, short.stderr
    assert "[FAIL] quota C4_CPUS (us-central1): need 16 (2 node(s)), limit 8, in use 0: short by 8" in short.stdout
    assert "zone us-central1-a has no c4-highcpu-8 capacity now" in step("fault", "FAULT=stockout").stdout
    applied = step("apply", "ARGS=-y")
    assert "gantry: local cloud: 2 node(s) on this machine, bills nothing" in applied.stderr, applied.stderr
    assert "Stock-out: zone us-central1-a has no capacity for" in applied.stdout, applied.stdout[-3000:]
    assert "Billing: none" in applied.stdout and "Created 2 x c4-highcpu-8 (Spot) in us-central1-b" in applied.stdout
    step("fault", "FAULT=none")
    idle = step("preempt", "NODE=1", ok=False)  # nothing runs yet: nothing to preempt
    assert one_error_line(idle) == ("local-cloud: error: cannot preempt a node: node 1 runs nothing to preempt "
                                    "(running, no run): start one with `make run-gcp`."), idle.stderr

    # the README's three lines, as typed, with the base image this machine has and the test's run id and pace
    built = step(*build[1:], f"BASE_IMAGE={BASE_IMAGE}")
    assert "Pushed 127.0.0.1:" in built.stdout, built.stdout[-2000:]
    readme_args = next(w for w in run if w.startswith("ARGS="))[len("ARGS="):]
    started = step(*(w for w in run[1:] if not w.startswith("ARGS=")),
                   f"ARGS={CHESS_RUN} {readme_args} {CHESS_FLAGS}")
    assert "node 1 gantry-node-1: run spec written (rank 1 of 2)" in started.stdout, started.stdout
    sync_folder = readme_args.split("--sync ", 1)[1].split()[0]
    serial = [folder / "nodes" / f"gantry-node-{rank}" / "serial-port-2.log" for rank in range(2)]

    def its_stats():
        status = step("status")
        return status if "iteration" in status.stdout and "ago" in status.stdout else None

    status = wait_until(its_stats, timeout=600, interval=3, what="status to show the program's own stats")
    rows = [line for line in status.stdout.splitlines() if re.match(r"\d+ +gantry-node-", line)]  # after make's echo
    assert [row.split()[2:4] for row in rows] == [["running", "chess"]] * 2 and rows[0].split()[-1] == "$0.00"
    bucket = cloud.environ["STORAGE_EMULATOR_HOST"]

    def synced(rank: int) -> list[str]:
        from local_cloud.storage import GcsServer

        names = GcsServer(bucket).names(f"gs://gantry-local-gantry-runs/runs/chess/sync/node-{rank}/{sync_folder}")
        return fnmatch.filter(names, "model_*.pt")

    wait_until(lambda: synced(1), timeout=300, interval=2, what="node 1's checkpoints in the bucket")

    # make preempt NODE=1: SIGTERM, the 30 s notice, the VM stopped; make status starts it, and the program resumes
    # from its checkpoints, which the agent put back from the bucket
    preempted = step("preempt", "NODE=1")
    assert re.search(r"preempted node 1 \(gantry-node-1, run chess\): SIGTERM, its agent stopped the program in \d+ s "
                     r"of the 30 s notice; the VM is stopped", preempted.stdout), preempted.stdout
    healed = step("status")
    assert "node 1 gantry-node-1: Spot VM TERMINATED during run chess: starting it;" in healed.stdout, healed.stdout
    resumed = wait_until(lambda: re.search(r"resumed from \S+model_(\d+)\.pt", serial[1].read_text(errors="replace")),
                         timeout=300, interval=2, what="node 1's program to resume from its synced checkpoint")
    assert int(resumed.group(1)) >= 1

    agents = [int(p.read_text()) for p in (folder / "nodes").glob("*/agent.pid")]
    stopped = step("stop", "ARGS=-y --power-off")
    assert "Stopped run chess." in stopped.stdout, stopped.stdout
    # instances.stop shuts the guest down as GCE does: each node's agent (and with it its program) goes
    wait_until(lambda: not any(alive(pid) for pid in agents), timeout=120, interval=1, what="the agents to stop")
    off = step("status", ok=False).stdout
    assert [row.split()[2] for row in off.splitlines() if re.match(r"\d+ +gantry-node-", row)] == ["terminated"] * 2, off
    home = tmp_path / "home"
    fetched = step(*(w.replace("RUN_ID", "chess") for w in fetch[1:]), f"ARGS=--dest {home}")
    assert "Copied" in fetched.stdout, fetched.stdout
    for rank in range(2):
        kept = home / "chess" / "sync" / f"node-{rank}" / sync_folder
        assert list(kept.glob("model_*.pt")) and (kept / "training_stats.json").is_file(), fetched.stdout

    ray_across_the_nodes(step, tmp_path, serial, build, run)

    destroyed = step("destroy", "ARGS=-y")
    assert "Kept: bucket gs://gantry-local-gantry-runs with the run data" in destroyed.stdout, destroyed.stdout[-2000:]
    agents = [int(p.read_text()) for p in (folder / "nodes").glob("*/agent.pid")]
    down = step("local-cloud-down")
    assert "local-cloud: down in" in down.stdout, down.stdout
    timings.append(f"all: {time.monotonic() - began:.0f} s")
    print("\n".join(timings), flush=True)  # with -s: the closing note's session

    # nothing left: no world file, process, container or port
    assert not (folder / WORLD_FILE).exists()
    assert not alive(cloud.pid) and not any(alive(pid) for pid in agents) and len(agents) == 2
    assert docker("ps", "-aq", "--filter", f"label={CONTAINER_LABEL}={folder}").stdout.split() == []
    for url in [*cloud.environ.values(), cloud.control_url]:
        if url.startswith("http"):
            assert not listening(url), f"{url} still answers after make local-cloud-down"
    again = step("status", ok=False)  # the verbs talk to Google Cloud again: here, to no deployment at all
    assert "local cloud" not in again.stderr


def ray_across_the_nodes(step, tmp_path: Path, serial: list[Path], build: list[str], run: list[str]) -> None:
    """A Ray project (no gantry.yaml, ray.init() and remote tasks) with --ray: one cluster over both nodes, its
    tasks played on each; status counts the cluster; node 1 ends when node 0's program has ended. First, --ray with
    an image that has no Ray is refused here, before a node is asked."""
    project_word = next(w for w in build if w.startswith("PROJECT="))
    command = next(w for w in run if w.startswith("ARGS=")).split(" -- ", 1)[1]  # the README's, which has no Ray
    no_ray = step("run-gcp", project_word, f"ARGS=--ray --detach --run-id no-ray -- {command}", ok=False)
    assert no_ray.returncode != 0 and "gantry: error: --ray: the image " in no_ray.stderr, no_ray.stderr
    assert "has no `ray` command (node 0 starts the Ray head with it)" in no_ray.stderr
    project = tmp_path / "ray_project"
    shutil.copytree(REPO / "tests" / "launcher" / "fixtures" / "ray_project", project)
    step("build-train", f"PROJECT={project}", f"BASE_IMAGE={BASE_IMAGE}", timeout=900)
    started = step("run-gcp", f"PROJECT={project}", "ARGS=--ray --detach --run-id ray --stats out/stats.jsonl -- "
                   "python selfplay_ray.py --nodes 2 --seconds 30")
    assert "Ray: node 0 starts a Ray head (port 6379) and runs the command with RAY_ADDRESS; nodes 1-1 join it" in \
        started.stdout, started.stdout
    sized = wait_until(lambda: (lambda out: out if "ray: 2 node(s)" in out else None)(step("status").stdout),
                       timeout=300, interval=3, what="status to count both nodes in the Ray cluster")
    assert re.search(r"ray: 2 node\(s\), \d+ CPUs and 0 GPUs in the cluster the program's ray.init\(\) joined", sized)
    print(next(line for line in sized.splitlines() if line.startswith("ray: ")), flush=True)

    def both_finished():
        rows = [line.split() for line in step("status").stdout.splitlines() if re.match(r"\d+ +gantry-node-", line)]
        return rows if [row[2:4] for row in rows] == [["finished", "ray"]] * 2 else None

    wait_until(both_finished, timeout=300, interval=3, what="both nodes to finish the Ray run")
    games = re.search(r"games per node: (\w+) (\d+), (\w+) (\d+)", serial[0].read_text(errors="replace"))
    assert games and int(games.group(2)) > 0 and int(games.group(4)) > 0, "the tasks ran on one node only"
    assert "node 0's program ended, and with it the Ray cluster this node joined" in serial[1].read_text(
        errors="replace")


# ---- bad input: one line, a non-zero exit, nothing started ----------------------------------------------------------

def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    return lines[0]


def test_preempt_or_fault_without_a_local_cloud_or_a_node_says_what_to_type(world):
    env, folder = world
    assert one_error_line(make(env, "preempt", "NODE=1")) == (
        "local-cloud: error: no local cloud is up here to preempt a node. Start one with `make local-cloud`.")
    assert one_error_line(make(env, "preempt")) == (
        "local-cloud: error: which node? make preempt needs NODE. Run `make preempt NODE=1` (0 is the master).")
    assert one_error_line(make(env, "fault", "FAULT=fire")) == (
        "local-cloud: error: FAULT=fire is not a fault the local cloud knows. Use FAULT=stockout, FAULT=quota, "
        "FAULT=none, e.g. `make fault FAULT=stockout`.")
    assert not folder.exists()


def test_local_cloud_with_no_docker_engine_or_bad_nodes_starts_nothing(world, tmp_path):
    env, folder = world
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "docker").write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    (fake_bin / "docker").chmod(0o755)
    no_engine = make({**env, "PATH": f"{fake_bin}:{env['PATH']}"}, "local-cloud")
    assert one_error_line(no_engine).startswith(
        "local-cloud: error: no Docker engine answers `docker info` (the local nodes are containers). Start Docker")
    assert one_error_line(make(env, "local-cloud", "NODES=many")).startswith(
        "local-cloud: error: NODES=many is not a number of nodes from 1 to 8")
    assert not (folder / WORLD_FILE).exists() and not (folder / "local-cloud.log").exists()


def test_a_second_local_cloud_is_refused_and_a_dead_ones_world_is_cleared_by_down(world):
    env, folder = world
    folder.mkdir()
    up = LocalWorld(pid=os.getpid(), nodes=2, infra_dir=str(folder / "infra"), environ={}, control_url="http://x")
    up.write(folder)
    assert one_error_line(make(env, "local-cloud")) == (
        f"local-cloud: error: the local cloud is already up here (pid {os.getpid()}, 2 node(s)). Use it, or "
        "`make local-cloud-down` first to start a fresh one.")
    dead = subprocess.Popen(["true"])
    dead.wait()
    LocalWorld(pid=dead.pid, nodes=2, infra_dir="x", environ={}, control_url="http://x").write(folder)
    refused = make(env, "status")  # a verb never guesses the world: not Google's, not endpoints nobody serves
    assert one_error_line(refused) == (
        f"gantry: error: the local cloud's process (pid {dead.pid}) is gone, but {folder / WORLD_FILE} says it is "
        "up. Run `make local-cloud-down` to clear what it left, then `make local-cloud` for a fresh one (or stay "
        "down to talk to Google Cloud).")
    cleared = make(env, "local-cloud-down")
    assert cleared.returncode == 0 and not (folder / WORLD_FILE).exists(), cleared.stderr


@needs_terraform
def test_while_it_is_up_a_verb_talks_to_it_and_says_so_and_leaves_a_real_deployment_alone(tmp_path, monkeypatch):
    """A deployment applied on Google (infra/ with its state) and the local cloud up: `gantry cost` prices the local
    cloud's settings and its first line says which world, and that infra/ is left alone."""
    infra = tmp_path / "infra"
    infra.mkdir()
    (infra / "terraform.tfvars").write_text('project_id = "my-real-project"\nnode_count = 5\n')
    (infra / "terraform.tfstate").write_text(json.dumps({"version": 4, "resources": [{"type": "google_compute_instance"}]}))
    folder = tmp_path / "lc"
    local_infra = folder / "infra"
    local_infra.mkdir(parents=True)
    for table in [REPO / "infra" / "variables.tf", *(REPO / "infra").glob("*.json")]:
        shutil.copy(table, local_infra / table.name)
    (local_infra / "terraform.tfvars").write_text(f'project_id = "gantry-local"\nzone = "{ZONE}"\nnode_count = 2\n')
    LocalWorld(pid=os.getpid(), nodes=2, infra_dir=str(local_infra), environ={}, control_url="http://x").write(folder)
    monkeypatch.chdir(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    status = main(["cost"], Environment(stdout=out, stderr=err, stdin=NotATerminal(""), environ={FOLDER_ENV: str(folder)}))
    assert status == 0, err.getvalue()
    assert err.getvalue().splitlines()[0] == (
        "gantry: local cloud: 2 node(s) on this machine, bills nothing (your Google Cloud deployment in infra/ is not "
        "touched meanwhile). `make local-cloud-down` goes back to Google Cloud.")
    assert "2 nodes in total" in out.getvalue() and "5 nodes" not in out.getvalue()
    assert (infra / "terraform.tfvars").read_text().startswith('project_id = "my-real-project"')
