"""gantry run of your own command and project (#41): the words after -- sorted into trainer flags, a torchrun program
or a plain command; --project's image; --sync / --stats; the spec each node gets; status, stop and fetch of such a
run. Against the fake Compute API and registry, terraform output from an outputs-only module, and the bucket behind
fake-gcs-server (packages/local_cloud/storage.py)."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from gantry import launches, projects
from gantry.launches import programs
from gantry.status import ExitStatus
from gantry_agent.containers import docker_run_args
from gantry_agent.outputs import stats_figures
from gantry_agent.settings import Settings
from launch_contract import (
    DEFAULT_SYNC_SECONDS,
    GANTRY_GPUS_PER_NODE_ENV,
    GANTRY_NODE_IPS_ENV,
    GANTRY_NODE_RANK_ENV,
    GANTRY_NUM_NODES_ENV,
    STOP_GRACE_SECONDS,
    Report,
    RunSpec,
    State,
    sync_url,
)
from launcher_helpers import REPO, isolated_environ, needs_terraform, run_module
from runs_helpers import add_nodes, apply_outputs_module, cluster_outputs, metadata_items, node_address
from suite_make import MAKE

pytestmark = [pytest.mark.terraform, needs_terraform]
NAMES = ["gantry-node-0", "gantry-node-1"]
COMMAND = ["python", "scripts/train_multi_gpu.py", "--gpus", "all"]




@pytest.fixture
def world(fake, deployment, registry, gcs):
    outputs = cluster_outputs(NAMES, registry_host=registry.host)
    apply_outputs_module(deployment.infra, outputs)
    digest = registry.add("demo-project/gantry/gantry-trainer", "cpu")  # what `make build-train` pushed
    gcs.create_bucket(outputs["bucket"])  # what `make apply` made
    return {"vms": add_nodes(fake, NAMES, statuses=["RUNNING", "TERMINATED"]), "gcs": gcs,
            "bucket": f"gs://{outputs['bucket']}", "environ": {}, "repository": outputs["image_repository_url"],
            "image": f"{outputs['image_repository_url']}/gantry-trainer@{digest}"}


@pytest.fixture
def project(tmp_path) -> Path:
    """A project of your own, committed: its version is the commit (gantry.projects.version)."""
    folder = tmp_path / "my-trainer"
    (folder / "scripts").mkdir(parents=True)
    (folder / "scripts" / "train_multi_gpu.py").write_text("print('training')\n")
    (folder / "Dockerfile").write_text("FROM python:3.12-slim\nWORKDIR /workspace\nCOPY . .\n")
    git = ["git", "-C", str(folder), "-c", "user.email=you@example.com", "-c", "user.name=you"]
    for command in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "train"]):
        subprocess.run([*git, *command], check=True, capture_output=True, timeout=60)
    return folder


def specs(world) -> list[RunSpec]:
    return [RunSpec.from_json(metadata_items(vm)["gantry-run"]) for vm in world["vms"]]


def nothing_started(fake, world) -> bool:
    return fake.started == [] and all("gantry-run" not in metadata_items(vm) for vm in world["vms"]) and \
        not any("setMetadata" in request for request in fake.requests)


@pytest.mark.parametrize("words, kind", [
    (["--run.max_steps=50"], None),  # the selfplay trainer's flags
    ([], None),
    (["-m", "toytrain.train", "--steps", "5"], programs.TORCHRUN),
    (["train.py", "--steps", "5"], programs.TORCHRUN),
    (["--", *COMMAND], programs.COMMAND),
    (["bash", "run.sh"], programs.COMMAND),
    (["./run.sh", "--fast"], programs.COMMAND),
    (["accelerate", "launch", "train.py"], programs.COMMAND),
])
def test_the_words_after_dashes_are_trainer_flags_a_torchrun_program_or_a_command(words, kind):
    program = programs.classify(words)
    assert (program and program.kind) == kind
    if program is not None:
        assert program.words == tuple(w for w in words if w != "--")


@pytest.mark.parametrize("hours, minutes, limit", [
    (3, [], "Time limit: 240 min; every node stops the run at "),  # the default: the trainer's, every program's
    (3, ["--max-minutes", "0"], "Time limit: none (--max-minutes 0); the nodes stop after max_run_hours = 3 h up"),
    (0, ["--max-minutes", "0"], "Time limit: none (--max-minutes 0) and max_run_hours = 0 (infra/terraform.tfvars)"),
])
def test_a_command_run_writes_command_sync_stats_and_every_address_into_each_nodes_spec(cli, fake, world, deployment,
                                                                                       hours, minutes, limit):
    deployment.write(max_run_hours=hours)
    result = cli("run", "--detach", "--run-id", "c1", "--sync", "checkpoints", "--sync", "logs/tb/", "--sync",
                 "checkpoints", "--stats", "out/stats.json", "--sync-every", "30", *minutes, "--", *COMMAND,
                 environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    run_dir = f"{world['bucket']}/runs/c1"
    for rank, spec in enumerate(specs(world)):
        assert spec.command and not spec.torchrun and spec.args == tuple(COMMAND)  # no selfplay flags, no budget
        assert spec.node_rank == rank and spec.node_addrs == (node_address(0), node_address(1))
        assert (spec.sync, spec.sync_seconds, spec.stats_file) == (("checkpoints", "logs/tb"), 30, "out/stats.json")
        assert spec.image == world["image"] and spec.run_dir == run_dir
    assert fake.started == ["gantry-node-1"]
    out = result.stdout
    assert f"Command: {' '.join(COMMAND)}, run as given in the image's working directory on every node" in out
    assert all(name in out for name in (GANTRY_NODE_RANK_ENV, GANTRY_NUM_NODES_ENV, GANTRY_NODE_IPS_ENV,
                                        GANTRY_GPUS_PER_NODE_ENV, "MASTER_ADDR"))
    assert f"to {sync_url(run_dir, 0, 'checkpoints')} (node 0; node N's under node-N)" in out
    assert f"to {sync_url(run_dir, 0, 'logs/tb')} " in out and "reads out/stats.json" in out
    assert limit in out and "--run.max_minutes" not in out
    assert {spec.max_minutes for spec in specs(world)} == {0 if minutes else 240}


def test_a_run_carries_its_limit_environment_and_shared_memory_to_every_node(cli, world, registry, project):
    registry.add(f"demo-project/gantry/{projects.name(project)}", f"cpu-{projects.version(project)}")
    result = cli("run", "--detach", "--run-id", "e1", "--max-minutes", "60", "--env", "WANDB_MODE=offline", "--env",
                 "MSG=a b", "--shm-size", "8G", "--stall-minutes", "20", "--project", str(project), "--", *COMMAND,
                 environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    for spec in specs(world):
        assert (spec.max_minutes, spec.stall_minutes, spec.env, spec.shm_size) == \
            (60, 20, ("WANDB_MODE=offline", "MSG=a b"), "8g")
        assert spec.deadline == float(spec.launched_at) + 3600
    out = result.stdout
    assert "Time limit: 60 min; every node stops the run at " in out and "Environment: MSG=a b" in out
    assert "Stall limit: a node whose program prints no new line and writes no new stats for 20 min is stopped" in out
    args = docker_run_args(specs(world)[1], "/var/lib/gantry/runs/e1", Settings({}))  # what node 1's agent runs
    env = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args[1:] if "=" in a and args[args.index(a) - 1] == "-e"}
    assert env["WANDB_MODE"] == "offline" and env["MSG"] == "a b" and env["GANTRY_DEADLINE"] == \
        f"{specs(world)[1].deadline:.0f}"
    assert args[args.index("--shm-size") + 1] == "8g"


GANTRY_YAML = """\
command: python scripts/train_multi_gpu.py --gpus all
check: python scripts/check_flags.py
sync: [checkpoints]
stats: checkpoints/stats.jsonl
figures: {loss: "loss {:.3f}"}
reports:
  - {title: Eval error, keys: "eval/*/error", format: "{:.1%}"}
"""
CHECK_FLAGS = """\
import sys
bad = [a for a in sys.argv[1:] if a.startswith("--epochs=-")]
if bad:
    sys.exit(f"train: error: {bad[0]} must be a positive number of epochs")
print("flags ok:", *sys.argv[1:])
"""


def commit(project: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (project / name).write_text(text)
    git = ["git", "-C", str(project), "-c", "user.email=you@example.com", "-c", "user.name=you"]
    for command in (["add", "."], ["commit", "-q", "-m", "gantry.yaml"]):
        subprocess.run([*git, *command], check=True, capture_output=True, timeout=60)


def test_a_project_declares_its_program_in_gantry_yaml_and_gets_what_the_kits_trainer_gets(cli, fake, world, registry,
                                                                                          project):
    """One path (#99): the command, its check before any node starts, its folders, stats and the lines status shows
    come from the project's gantry.yaml, as the kit's trainer's come from the repository's."""
    commit(project, {"gantry.yaml": GANTRY_YAML, "scripts/check_flags.py": CHECK_FLAGS})
    registry.add(f"demo-project/gantry/{projects.name(project)}", f"cpu-{projects.version(project)}")
    refused = cli("run", "--detach", "--run-id", "g1", "--project", str(project), "--", "--epochs=-1",
                  environ=world["environ"])
    assert refused.status == ExitStatus.ERROR
    assert refused.stderr.splitlines() == [
        ("gantry: error: the program's check refuses the launch: --epochs=-1 must be a positive number of epochs. "
        f"Nothing was started (`python scripts/check_flags.py --epochs=-1` in {project}; {project}/gantry.yaml).")]
    assert nothing_started(fake, world)

    result = cli("run", "--detach", "--run-id", "g1", "--project", str(project), "--sync", "logs", "--",
                 "--epochs=3", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert ("Command: python scripts/train_multi_gpu.py --gpus all --epochs=3, run as given in the image's working "
            "directory on every node") in result.stdout and "(gantry.yaml's command)" in result.stdout
    spec = specs(world)[0]
    assert spec.command and spec.args == ("python", "scripts/train_multi_gpu.py", "--gpus", "all", "--epochs=3")
    assert (spec.sync, spec.stats_file, dict(spec.figures)) == (("checkpoints", "logs"), "checkpoints/stats.jsonl",
                                                          {"loss": "loss {:.3f}"})
    run_url = f"{world['bucket']}/runs/g1"
    world["gcs"].write(f"{sync_url(run_url, 0, 'checkpoints')}/stats.jsonl", (
        b'{"epoch": 2, "loss": 0.9, "eval/easy/error": 0.1, "eval/hard/error": 0.4}\n{"epoch": 3, "loss": 0.5}\n'))
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = {"gantry/boot": "ready", "gantry/agent": json.dumps(
            {"state": "running", "run": "g1", "node_rank": rank, "step": 3, "figures": {"epoch": 3, "loss": 0.5},
             "detail": "", "heartbeat": int(time.time())})}
    status = cli("status", environ=world["environ"])
    assert status.status == ExitStatus.OK, status.output
    assert "node 0: step 3 | loss 0.500" in status.stdout  # as its figures format it; the step once
    assert "Eval error at step 2: easy 10.0%  hard 40.0%" in status.stdout  # the newest record that holds them


@pytest.mark.parametrize("words, line", [
    (["--gpu-ids", "0"], "--gpu-ids 0 on nodes without GPUs. Drop it, or set use_gpu = true "),
    (["--cpus", "17"], "--cpus 17 is more than a c4-highcpu-16 node has (16 vCPUs). Give at most 16, "),
    (["--gpu-ids", "0,zero"], "--gpu-ids '0,zero' is not a list of GPU indices. "),
    (["--gpu-ids", "1,1"], "--gpu-ids '1,1' is not a list of GPU indices. "),
    (["--cpus", "-1"], "--cpus -1 is not a number of CPUs. "),
])
def test_run_refuses_cpus_or_gpus_the_nodes_lack_in_one_line(cli, fake, world, deployment, words, line):
    deployment.write()  # one c4-highcpu-16 a node, no GPU
    result = cli("run", "--detach", "--run-id", "r1", *words, "--", *COMMAND, environ=world["environ"])
    assert result.status == ExitStatus.ERROR, result.output
    assert result.stderr.splitlines() == [result.stderr.strip()] and result.stderr.startswith("gantry: error: " + line)
    assert nothing_started(fake, world)


def test_a_run_gets_the_share_of_each_nodes_cpus_it_asks_for(cli, world, deployment):
    deployment.write()
    result = cli("run", "--detach", "--run-id", "r1", "--cpus", "2.5", "--", *COMMAND, environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "Resources: each node's program gets 2.5 CPUs (the rest of the node stays idle)" in result.stdout
    spec = specs(world)[1]
    args = docker_run_args(spec, "/var/lib/gantry/runs/r1", Settings({}))  # what node 1's agent runs
    assert spec.cpus == 2.5 and args[args.index("--cpus") + 1] == "2.5"
    assert "--gpus" not in args[:args.index(spec.image)]  # a CPU node: docker is asked for no GPU


def test_a_gpu_node_gives_the_program_the_gpus_it_names_and_counts_them():
    spec = RunSpec(run_id="r1", image="i@sha256:abc", node_rank=0, nnodes=1, master_addr="10.0.0.2", gpu=True,
                   gpu_ids=(0, 2), args=("python", "train.py"), command=True)
    args = docker_run_args(spec, "/var/lib/gantry/runs/r1", Settings({}))
    assert args[args.index("--gpus") + 1] == '"device=0,2"'  # docker's one value; its commas would split it unquoted
    assert f"{GANTRY_GPUS_PER_NODE_ENV}=2" in args
    with pytest.raises(ValueError, match="gpu_ids"):
        RunSpec(**{**spec.__dict__, "gpu": False})  # a CPU node has no GPU to give


def test_run_project_launches_the_image_of_the_projects_version_pinned_by_digest(cli, world, registry, project):
    digest = registry.add(f"demo-project/gantry/{projects.name(project)}", f"cpu-{projects.version(project)}")
    result = cli("run", "--detach", "--run-id", "p1", "--project", str(project), "--sync", "checkpoints", "--",
                 *COMMAND, environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    ref = projects.image_ref(world["repository"], project, "cpu")  # what `gantry build --project` pushes
    assert ref.endswith(f"/my-trainer:cpu-{projects.git_commit(project)}")
    pinned = f"{ref.rsplit(':', 1)[0]}@{digest}"
    assert [spec.image for spec in specs(world)] == [pinned, pinned] and specs(world)[0].command


def test_run_project_refuses_a_version_the_registry_lacks_and_says_to_build_it(cli, fake, world, registry, project):
    result = cli("run", "--detach", "--project", str(project), "--", *COMMAND, environ=world["environ"])
    assert result.status == ExitStatus.ERROR
    assert result.stderr.splitlines() == [
        (f"gantry: error: image {projects.image_ref(world['repository'], project, 'cpu')} is not in the registry. "
        f"Build and push it: `make build-train PROJECT={project}` (the tag is the project's version: its git commit, "
        "or a hash of its files while edits are uncommitted, then the kit's torch recipe where gantry writes its "
        "Dockerfile, so each commit, edit or kit upgrade needs a build).")]
    assert nothing_started(fake, world)


@pytest.mark.parametrize("words, line", [
    (["--project", "PROJECT/nope", "--", *COMMAND], "--project PROJECT/nope is not a folder. "),
    (["--project", "PROJECT", "--", "--epochs=5"], "nothing to run: no command after -- and no gantry.yaml in PROJECT. "),
    (["--project", "PROJECT", "--", "python", "train.py"], "train.py is not a file in the project PROJECT. "),
    (["--project", "PROJECT", "--", "python3", "-u", "scripts/missing.py"], "scripts/missing.py is not a file in "),
    (["--project", "PROJECT", "--", "python", "../outside.py"], "../outside.py is not a file in the project "),
    (["--project", "PROJECT", "--image", "IMAGE", "--", *COMMAND], "--project and --image both name the image. "),
    (["--project", "PROJECT", "--sync", "escape", "--", *COMMAND], "sync folder 'escape' leads outside the project "),
    (["--project", "PROJECT", "--stats", "escape/stats.json", "--", *COMMAND], ("stats file 'escape/stats.json' leads "
                                                                               "outside the project ")),
    (["--sync", "/abs/checkpoints", "--", *COMMAND], "sync folder '/abs/checkpoints' must be a path inside the "),
    (["--sync", "../up", "--", *COMMAND], "sync folder '../up' must be a path inside the project"),
    (["--stats", "a/../../b.json", "--", *COMMAND], "stats file 'a/../../b.json' must be a path inside the project"),
    (["--sync-every", "0", "--", *COMMAND], "--sync-every 0 is not a number of seconds. "),
    # what a node would refuse, or crash-loop on, refused here (#99)
    (["--project", "PROJECT", "--sync", "scripts/train_multi_gpu.py", "--", *COMMAND],
     ("--sync scripts/train_multi_gpu.py is a file in the project PROJECT; the node keeps folders. Name the folder "
     "the program writes it in (--sync scripts).")),
    (["--sync", "ckpt", "--sync", "ckpt/best", "--", *COMMAND], "--sync ckpt/best and --sync ckpt overlap "),
    (["--run-id", "MyRun", "--", *COMMAND], "'MyRun' is not a run id (lowercase letters, digits, . _ -, "),
    (["--master-port", "80", "--", *COMMAND], ("--master-port 80 is not a port the program can listen on. Give a "
                                              "port from 1024 to 65535 (default 29500).")),
    (["--master-port", "70000", "--", *COMMAND], "--master-port 70000 is not a port the program can listen on. "),
    (["--nproc-per-node", "-1", "--", *COMMAND], "--nproc-per-node -1 is not a number of ranks per node. "),
    (["--nproc-per-node", "65", "--", *COMMAND], "--nproc-per-node 65 is not a number of ranks per node. "),
    (["--max-minutes", "-5", "--", *COMMAND], "--max-minutes -5 is not a number of minutes. "),
    (["--stall-minutes", "-1", "--", *COMMAND], "--stall-minutes -1 is not a number of minutes. "),
    (["--env", "NODE_RANK=3", "--", *COMMAND], "--env NODE_RANK is set by the agent on every node "),
    (["--env", "GANTRY_DEADLINE=0", "--", *COMMAND], "--env GANTRY_DEADLINE is set by the agent on every node "),
    (["--env", "2FAST=1", "--", *COMMAND], "--env '2FAST=1' is not KEY=VALUE "),
    (["--env", "WANDB_MODE", "--", *COMMAND], "--env 'WANDB_MODE' is not KEY=VALUE "),
    (["--shm-size", "lots", "--", *COMMAND], "--shm-size 'lots' is not a size docker takes. "),
])
def test_run_refuses_a_bad_project_sync_or_stats_in_one_line_before_anything_starts(cli, fake, world, project,
                                                                                     registry, words, line):
    (project / "escape").symlink_to(project.parent)  # committed or not, a link out of the folder
    words = [w.replace("PROJECT", str(project)).replace("IMAGE", world["image"]) for w in words]
    result = cli("run", "--detach", "--run-id", "r1", *words, environ=world["environ"])
    assert result.status == ExitStatus.ERROR, result.output
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("gantry: error: " + line.replace("PROJECT", str(project))), result.stderr
    assert nothing_started(fake, world)


def test_resume_of_a_run_the_bucket_does_not_hold_is_refused_naming_those_it_holds(cli, fake, world):
    empty = cli("run", "--detach", "--resume", "run-20260601-120000", environ=world["environ"])
    assert empty.status == ExitStatus.ERROR
    assert empty.stderr.splitlines() == [(f"gantry: error: no run run-20260601-120000 in {world['bucket']}/runs/ "
                                         "to resume. The bucket holds no run yet: start one without --resume.")]
    for run_id in ("run-20260601-120000", "run-20260602-090000"):
        world["gcs"].write(f"{world['bucket']}/runs/{run_id}/stats.jsonl", b'{"step": 1}\n')
    typo = cli("run", "--detach", "--resume", "run-20260601-12000", environ=world["environ"])
    assert typo.status == ExitStatus.ERROR
    assert typo.stderr.splitlines() == [
        (f"gantry: error: no run run-20260601-12000 in {world['bucket']}/runs/ to resume. Resume one it holds "
        "(run-20260601-120000, run-20260602-090000), or start a new run without --resume.")]
    assert nothing_started(fake, world)
    # a run the bucket got since this process listed it: the listing is asked again, not remembered
    world["gcs"].write(f"{world['bucket']}/runs/run-20260603-070000/stats.jsonl", b'{"step": 1}\n')
    held = cli("run", "--detach", "--resume", "run-20260603-070000", environ=world["environ"])
    assert held.status == ExitStatus.OK, held.output
    assert specs(world)[0].run_id == "run-20260603-070000"


def test_status_of_a_command_run_shows_each_nodes_last_line_own_stats_and_error(cli, world):
    assert cli("run", "--detach", "--run-id", "c2", "--stats", "stats.json", "--", *COMMAND,
               environ=world["environ"]).status == ExitStatus.OK
    now = int(time.time())
    step, numbers = stats_figures(json.dumps({"epoch": 3, "loss": 0.41234, "acc": {"top1": 0.9}, "tokens": 120000}))
    reports = [Report(state=State.RUNNING, run="c2", node_rank=0, step=step, figures=numbers, heartbeat=now - 300,
                      last_line="epoch 3 | loss 0.412", last_line_at=now - 180),
               Report(state=State.ERROR, run="c2", node_rank=1, heartbeat=now - 40,
                      detail="exit 1: ZeroDivisionError: division by zero", last_line="ZeroDivisionError: division "
                      "by zero", last_line_at=now - 600)]
    for vm, report in zip(world["vms"], reports):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = {"gantry/boot": "ready", "gantry/agent": report.to_json()}
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    lines = result.stdout.splitlines()
    assert lines[1].split()[:5] == ["0", "gantry-node-0", "running", "c2", "3"] and lines[1].split()[5] == "5m"
    assert lines[2].split()[:4] == ["1", "gantry-node-1", "error", "c2"]
    assert "node 1: exit 1: ZeroDivisionError: division by zero" in lines
    assert "node 0: last line (3m ago): epoch 3 | loss 0.412" in lines
    assert "node 0: step 3 | loss 0.4123 | acc/top1 0.9 | tokens 120000" in lines
    assert "node 1: last line (10m ago): ZeroDivisionError: division by zero" in lines
    assert "Pons" not in result.stdout and "master:" not in result.stdout  # the selfplay trainer's, not a command's


def test_status_says_why_a_stats_file_gives_no_numbers_instead_of_waiting_for_them_forever(cli, world, tmp_path):
    from gantry_agent.outputs import RunOutputs

    assert cli("run", "--detach", "--run-id", "c4", "--sync", "out", "--stats", "out/stats", "--", *COMMAND,
               environ=world["environ"]).status == ExitStatus.OK
    run = specs(world)[0]
    outputs = RunOutputs(dataclasses.replace(run, run_dir=""), str(tmp_path / "r"), None, None, "", print)
    stats = tmp_path / "r" / "sync" / "out" / "stats"  # where the agent reads a --stats file in a --sync folder
    stats.mkdir(parents=True)  # the program made a folder of that name
    assert outputs.progress() is None and outputs.stats_problem == "is a folder, not a file"
    stats.rmdir()
    stats.write_text("epoch 3 done\n")  # a log, not JSON
    assert outputs.progress() == (None, {}) and outputs.stats_problem.startswith("holds no JSON object")
    problems = [Report(state=State.RUNNING, run="c4", node_rank=0, stats_problem="is a folder, not a file"),
                Report(state=State.RUNNING, run="c4", node_rank=1)]
    for vm, report in zip(world["vms"], problems):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = {"gantry/boot": "ready", "gantry/agent": report.to_json()}
    lines = cli("status", environ=world["environ"]).stdout.splitlines()
    assert "node 0: --stats out/stats is a folder, not a file" in lines
    assert "node 1: no numbers in out/stats yet" in lines
    # once a node reports numbers the run is counting: a node that writes none (the kit's trainer's ranks but 0)
    # is not said to be waiting for them
    world["vms"][0]["guestAttributes"]["gantry/agent"] = Report(state=State.RUNNING, run="c4", node_rank=0, step=5,
                                                               figures={"loss": 0.5}).to_json()
    lines = cli("status", environ=world["environ"]).stdout.splitlines()
    assert "node 0: step 5 | loss 0.5" in lines and not [line for line in lines if "no numbers" in line]


def test_status_restarts_a_preempted_spot_node_of_a_command_run_and_says_it_bills(cli, fake, world):
    assert cli("run", "--detach", "--run-id", "c3", "--sync", "checkpoints", "--", *COMMAND,
               environ=world["environ"]).status == ExitStatus.OK
    fake.started.clear()
    for vm in world["vms"]:
        vm["scheduling"] = {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}
    world["vms"][1]["status"] = "TERMINATED"
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert fake.started == ["gantry-node-1"]
    assert ("node 1 gantry-node-1: Spot VM TERMINATED during run c3: starting it (it bills while it runs); its "
            "program starts again as given, in the same run folder, its --sync folders back from the bucket") in result.stdout


def test_fetch_brings_each_nodes_sync_folders_home(cli, world, deployment):
    run, write = f"{world['bucket']}/runs/c4", world["gcs"].write
    for rank in (0, 1):
        folder = sync_url(run, rank, "checkpoints")
        write(f"{folder}/model.pt", b"w" * 100)
        write(f"{folder}/.hydra/config.yaml", b"lr: 0.1\n")  # the program's own dot-folder comes too
    write(f"{sync_url(run, 0, 'checkpoints')}/.model-2.pt.part", b"half")  # an upload in progress
    result = cli("fetch", "c4", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    local = deployment.root / "runs" / "c4"
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == [
        f"sync/node-{rank}/checkpoints/{name}" for rank in (0, 1) for name in (".hydra/config.yaml", "model.pt")]


def test_node_addresses_come_from_terraform_and_an_older_state_knows_node_0s_alone():
    outputs = cluster_outputs(["n0", "n1", "n2"])
    assert launches.Cluster.from_outputs(outputs).node_addrs == tuple(node_address(r) for r in range(3))
    del outputs["node_addresses"]  # applied before infra/outputs.tf had it
    assert launches.Cluster.from_outputs(outputs).node_addrs == (outputs["master_address"],)
    assert 'output "node_addresses"' in (REPO / "infra" / "outputs.tf").read_text()


def test_the_help_of_stop_fetch_and_status_says_what_they_do_with_a_command_run(tmp_path):
    environ = isolated_environ(tmp_path)
    stop = run_module(["stop", "--help"], tmp_path, environ).stdout
    assert Settings({}).stop_grace_seconds == STOP_GRACE_SECONDS  # the agent waits what the help says
    assert f"SIGTERM (`docker stop`) and waits\n{STOP_GRACE_SECONDS} s" in stop and "--sync folders to the bucket" in stop
    fetch = run_module(["fetch", "--help"], tmp_path, environ).stdout
    assert "--sync folders under sync/node-RANK/DIR" in fetch
    status = run_module(["status", "--help"], tmp_path, environ).stdout
    assert "bills again while it runs" in status and "its --sync folders back from the bucket" in status
    run = run_module(["run", "--help"], tmp_path, environ).stdout
    assert f"(default: {DEFAULT_SYNC_SECONDS})" in run and "--project DIR" in run


def test_make_run_gcp_passes_project_to_gantry_run_as_one_word_with_its_spaces():
    # PROJECT="my proj" once launched the sibling folder `my` with the command `proj --detach -- ...`
    made = subprocess.run([*MAKE, "-n", "run-gcp", "PROJECT=../my trainer",
                           f"ARGS=--sync checkpoints -- {' '.join(COMMAND)}"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert made.returncode == 0, made.stderr
    line = next(line for line in made.stdout.splitlines() if "-m gantry run" in line)
    words = shlex.split(line)
    assert words[words.index("run"):] == ["run", "--project", "../my trainer", "--sync", "checkpoints", "--", *COMMAND]


# muzero-general's muzero.py:96 (github.com/werner-duvaud/muzero-general), as a Ray project written for one machine
MUZERO_INIT = "import ray\n\ntotal_gpus = 0\nray.init(num_gpus=total_gpus, ignore_reinit_error=True)\n"


def test_a_ray_project_is_one_cluster_and_a_ray_init_that_cannot_join_one_is_refused_here(cli, fake, world, registry,
                                                                                       project):
    """gantry.yaml's ray: true is --ray: every node's spec says so, and status counts the cluster node 0 reports. A
    ray.init() given num_gpus, which Ray refuses when it joins a running cluster, is named before a node is asked."""
    commit(project, {"gantry.yaml": "command: python scripts/train_multi_gpu.py\nray: true\n",
                     "scripts/train_multi_gpu.py": MUZERO_INIT})
    registry.add(f"demo-project/gantry/{projects.name(project)}", f"cpu-{projects.version(project)}")
    refused = cli("run", "--detach", "--run-id", "ray1", "--project", str(project), environ=world["environ"])
    assert refused.status == ExitStatus.ERROR
    assert refused.stderr.splitlines() == [(
        "gantry: error: --ray: scripts/train_multi_gpu.py:4 ray.init(num_gpus=...): Ray refuses these when "
        "ray.init() joins a running cluster (\"When connecting to an existing cluster, num_cpus and num_gpus must "
        "not be provided\"), so node 0 would crash-loop. Drop them (the cluster counts each node's CPUs and GPUs), "
        "or pass them only when RAY_ADDRESS is unset; nothing was started.")]
    assert nothing_started(fake, world)

    commit(project, {"scripts/train_multi_gpu.py": (  # its own choice: the cluster when it is given one
        "import os\nimport ray\n\nif os.environ.get('RAY_ADDRESS'):\n    ray.init()\nelse:\n    ray.init(num_cpus=4)\n")})
    registry.add(f"demo-project/gantry/{projects.name(project)}", f"cpu-{projects.version(project)}")
    result = cli("run", "--detach", "--run-id", "ray1", "--project", str(project), environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert ("Ray: node 0 starts a Ray head (port 6379) and runs the command with RAY_ADDRESS; nodes 1-1 join it and "
            "run nothing else, and end when node 0's command has ended") in result.stdout
    assert [(spec.ray, spec.command) for spec in specs(world)] == [(True, True), (True, True)]
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = {"gantry/boot": "ready", "gantry/agent": json.dumps(
            {"state": "running", "run": "ray1", "node_rank": rank, "detail": "", "heartbeat": int(time.time()),
             "ray": {"nodes": 2, "CPU": 32.0, "GPU": 0.0} if rank == 0 else {}})}
    status = cli("status", environ=world["environ"])
    assert "ray: 2 node(s), 32 CPUs and 0 GPUs in the cluster the program's ray.init() joined" in status.stdout
