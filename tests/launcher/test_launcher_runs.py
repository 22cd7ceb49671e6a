"""gantry run / status / logs / stop / fetch against the fake Compute API, with terraform output from
an outputs-only module and the bucket behind fake-gcs-server (packages/local_cloud/storage.py), read by gantry's own gcsfs."""

from __future__ import annotations

import json
import re
import time

import pytest
from agent_helpers import wait_until
from gantry import config, cost, launches
from gantry.config import DEFAULT_RUN_MAX_MINUTES
from gantry.launches import program_file, stats_reports
from gantry.status import ExitStatus
from gantry_agent.containers import docker_run_args
from gantry_agent.outputs import stats_figures
from gantry_agent.settings import Settings
from launch_contract import (
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    NNODES_ENV,
    NODE_RANK_ENV,
    RUN_DIR_ENV,
    RUN_ID_RULE,
    RunSpec,
)
from launcher_helpers import needs_terraform
from runs_helpers import (
    add_nodes,
    apply_outputs_module,
    cluster_outputs,
    kit_run_folder,
    metadata_items,
    trainer_stats,
)
from selfplay.record_keys import DEFAULT_CONFIG, arena_key, eval_key
from toytrain.train import train_record

pytestmark = [pytest.mark.terraform, needs_terraform]
NAMES = ["gantry-node-0", "gantry-node-1"]
KIT = program_file.load(program_file.KIT_ROOT)  # the kit's trainer, as the repository's gantry.yaml declares it




@pytest.fixture
def world(fake, deployment, tmp_path, registry, gcs):
    outputs = cluster_outputs(NAMES, registry_host=registry.host)
    apply_outputs_module(deployment.infra, outputs)
    digest = registry.add("demo-project/gantry/gantry-trainer", "cpu")  # what `make build-train` pushed
    gcs.create_bucket(outputs["bucket"])  # what `make apply` made
    return {"vms": add_nodes(fake, NAMES, statuses=["RUNNING", "TERMINATED"]), "gcs": gcs,
            "bucket": f"gs://{outputs['bucket']}", "staging": tmp_path / "staging", "environ": {},
            "image": f"{outputs['image_repository_url']}/gantry-trainer@{digest}"}


def running_report(run: str, rank: int, step: int) -> dict[str, str]:
    return {"gantry/boot": "ready", "gantry/agent": json.dumps(
        {"state": "running", "run": run, "node_rank": rank, "step": step, "heartbeat": int(time.time()) - 30,
         "figures": {"selfplay/games": 2100, "losses/total": 1.2}, "detail": ""})}


def test_run_starts_stopped_nodes_and_writes_a_spec_per_rank_keeping_other_keys(cli, fake, world):
    result = cli("run", "--detach", "--run-id", "r1", "--", "--config", "tictactoe", "--run.max_steps=50",
                 environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert fake.started == ["gantry-node-1"]  # node 1 was TERMINATED (idle shutdown): started first
    assert "node 1 gantry-node-1 is TERMINATED: starting it" in result.stdout
    specs = []
    for rank, vm in enumerate(world["vms"]):
        items = metadata_items(vm)
        assert items["gantry-agent"] == "# the agent" and items["startup-script"] == "#!/bin/bash"
        assert vm["metadata"]["fingerprint"] != "fp-0"
        spec = RunSpec.from_json(items["gantry-run"])
        assert spec.node_rank == rank and spec.nnodes == 2 and spec.action == "start"
        specs.append(spec)
    assert specs[0].master_addr == specs[1].master_addr == "10.128.0.2"
    assert specs[0].image == world["image"]  # the tag resolved to the digest the registry holds
    # the kit's trainer is a command as any: gantry.yaml's, the flags after -- appended; its figures as it names them
    assert specs[0].command and specs[0].args == (*KIT.command, "--config", "tictactoe", "--run.max_steps=50")
    assert specs[0].figures == tuple(KIT.figures.items()) and specs[0].show == KIT.show  # in the file's order
    assert specs[0].run_dir == f"{world['bucket']}/runs/r1"
    # every launch has the default limit, kept by the agents, whatever runs; the trainer's flags are its own
    assert specs[0].max_minutes == DEFAULT_RUN_MAX_MINUTES and specs[0].deadline is not None
    assert f"Time limit: {DEFAULT_RUN_MAX_MINUTES} min; every node stops the run at" in result.stdout
    assert specs[0].launched_at == specs[1].launched_at
    assert "make status" in result.stdout

    time.sleep(0.01)
    with trainer_stats(f"{world['bucket']}/runs/r1", world["staging"]):  # the trainer made the run's folder
        pass
    again = cli("run", "--detach", "--resume", "r1", environ=world["environ"])
    assert again.status == ExitStatus.OK, again.output
    resumed = RunSpec.from_json(metadata_items(world["vms"][0])["gantry-run"])
    assert resumed.run_id == "r1" and resumed.launched_at != specs[0].launched_at


def trainer_config(overrides: tuple[str, ...] = ()):
    """The config a selfplay run of the launcher's default config loads, with ``overrides``, as the trainer loads it."""
    from selfplay.config_io import load, resolve_config

    return load(resolve_config(DEFAULT_CONFIG), list(overrides))


def checkpoint_in_bucket(run_url: str, staging, overrides: tuple[str, ...], step: int = 20) -> str:
    """A checkpoint of the default config with ``overrides``, an untrained net of its shape, written by the trainer's
    own code into its run folder and copied to the bucket by the agent's, as a node leaves it; its bucket URL."""
    from selfplay import checkpoint
    from selfplay.games import make_game
    from selfplay.model import build_model

    cfg = trainer_config(overrides)
    m = cfg.model
    net = build_model(make_game(cfg.game.name), m.channels, m.blocks, m.policy_filters, m.value_filters)
    local, copy = kit_run_folder(run_url, staging)
    path = checkpoint.save(local, checkpoint.Checkpoint(step=step, config=cfg.to_dict(), model=net.state_dict()))
    copy.push()
    return f"{copy.url}/{path.name}"


def test_resume_refuses_a_net_the_buckets_checkpoint_does_not_fit_before_starting_a_node(cli, fake, world):
    # the run began before the default net changed (connect4.yaml's went 32 -> 48 wide): the trainer on a node would
    # refuse it after the nodes bill, so the laptop reads the bucket's newest checkpoint and refuses first
    run_url = f"{world['bucket']}/runs/r1"
    copied = checkpoint_in_bucket(run_url, world["staging"], ("--model.channels=8",))
    refused = cli("run", "--detach", "--resume", "r1", environ=world["environ"])
    assert refused.status == ExitStatus.ERROR, refused.output
    shipped = trainer_config().model.channels
    assert refused.stderr.strip().splitlines() == [(
        f"gantry: error: the program's check refuses the launch: checkpoint {copied} was trained with "
        f"model.channels=8 but this run asks for model.channels={shipped}: resume it with --model.channels=8, or a "
        f"new run.dir to start fresh. Nothing was started (`{' '.join(KIT.check)}` in {KIT.folder}; {KIT.path}).")]
    assert fake.started == [] and all("gantry-run" not in metadata_items(vm) for vm in world["vms"])

    resumed = cli("run", "--detach", "--resume", "r1", "--", "--model.channels=8", environ=world["environ"])
    assert resumed.status == ExitStatus.OK, resumed.output
    assert (f"Run directory: {run_url}; its check: resumes from {copied.rsplit('/', 1)[-1]} at step 20, its game and net checked"
            in resumed.stdout)
    assert RunSpec.from_json(metadata_items(world["vms"][0])["gantry-run"]).args[-1] == "--model.channels=8"


def test_run_refuses_an_image_the_registry_does_not_hold_before_touching_a_node(cli, fake, world, registry):
    registry.manifests.clear()
    result = cli("run", "--detach", "--run-id", "r1", environ=world["environ"])
    assert result.status == ExitStatus.ERROR
    assert result.stderr.strip().splitlines()[-1] == (
        f"gantry: error: image {registry.host}/demo-project/gantry/gantry-trainer:cpu is not in the registry. "
        "Run `make build-train` (it builds and pushes to the deployment's repository), or name one with --image.")
    assert fake.started == [] and all("gantry-run" not in metadata_items(vm) for vm in world["vms"])


def test_run_starts_your_own_torchrun_program_with_the_same_rendezvous_and_run_dir(cli, world):
    result = cli("run", "--detach", "--run-id", "r1", "--sync", "out", "--stats", "out/stats.jsonl", "--", "-m",
                 "toytrain.train", "--steps", "5", "--", "--config", "x",
                 environ=world["environ"])  # a -- and --config inside the program are its own
    assert result.status == ExitStatus.OK, result.output
    assert "Program: torchrun -m toytrain.train --steps 5 -- --config x" in result.stdout
    run_dir = f"{world['bucket']}/runs/r1"
    for rank, vm in enumerate(world["vms"]):
        spec = RunSpec.from_json(metadata_items(vm)["gantry-run"])
        assert spec.torchrun and spec.args == ("-m", "toytrain.train", "--steps", "5", "--", "--config", "x")
        assert spec.run_dir == run_dir and spec.image == world["image"]
        assert spec.sync == ("out",) and spec.stats_file == "out/stats.jsonl"  # its folder, kept by the agent
        # what the agent runs for it: torchrun as the entry point, the rendezvous as flags and as the environment
        argv = docker_run_args(spec, "/var/lib/gantry/runs/r1", Settings({}))
        assert argv[argv.index("--entrypoint") + 1] == "torchrun"
        assert argv[argv.index(spec.image) + 1:] == [
            "--nnodes=2", f"--node-rank={rank}", "--master-addr=10.128.0.2", "--master-port=29500",
            "--nproc-per-node=1", *spec.args]
        env = {argv[i + 1].partition("=")[0]: argv[i + 1].partition("=")[2] for i, a in enumerate(argv) if a == "-e"}
        assert {k: env[k] for k in (NNODES_ENV, NODE_RANK_ENV, MASTER_ADDR_ENV, MASTER_PORT_ENV, RUN_DIR_ENV)} == {
            NNODES_ENV: "2", NODE_RANK_ENV: str(rank), MASTER_ADDR_ENV: "10.128.0.2", MASTER_PORT_ENV: "29500",
            RUN_DIR_ENV: run_dir}
    entry = RunSpec.from_json(metadata_items(world["vms"][0])["gantry-run"])
    entry = RunSpec(**{**entry.__dict__, "torchrun": False, "args": ("--config", "connect4")})
    assert "--entrypoint" not in docker_run_args(entry, "/runs", Settings({}))  # neither: the image's entry point


@pytest.mark.parametrize("words, problem", [
    (["--"], "the command after -- is empty"),
    (["--", "-m"], "-m names no module"),
    (["--", "-m", "--steps=5"], "-m names no module"),
    (["--image", "IMAGE", "--", "-m", "mypkg.train"], "is not in the registry"),
    (["--", "-m", "toytrain.trian"], "no module toytrain.trian in the kit's image"),
    (["--", "-m", "mypkg.train"], "no module mypkg.train in the kit's image"),
    # a Ray cluster runs a plain command on node 0; the kit's image has no `ray` (judged by the local engine's copy)
    (["--ray", "--", "-m", "toytrain.train"], ("--ray runs a plain command on node 0, in the Ray cluster; -m MODULE "
                                               "and SCRIPT.py are torchrun programs. Give the command itself: -- "
                                               "python -m toytrain.train.")),
    # the kit's trainer's own refusals, by the check its gantry.yaml names, on the laptop
    (["--", "--config", "chess"], ("the program's check refuses the launch: --config chess is not a packaged "
                                  "config; a node's image holds only the packaged configs (connect4, tictactoe)")),
    (["--", "--config", "my.yaml"], "the program's check refuses the launch: --config my.yaml is not a packaged"),
    (["--", "--search.simulations=abc"], ("the program's check refuses the launch: search.simulations='abc' must "
                                         "be an integer")),
    (["--", "--config", "tictactoe", "--serch.simulations=5"], "the program's check refuses the launch: "),
    # its run folder is its gantry.yaml's sync folder: another would be written on the node and copied nowhere
    (["--", "--run.dir=runs/mine"], ("the program's check refuses the launch: run.dir is trainer on a node (the "
                                     "folder its agent keeps in the bucket) and runs/mine by your flags")),
    # every field is checked from its declaration (#42): a seed numpy refuses never reaches a node
    (["--", "--run.seed=-1"], "the program's check refuses the launch: run.seed=-1 must be in 0..4294967295"),
])
def test_run_refuses_a_bad_program_in_one_line_before_touching_a_node(cli, fake, world, registry, words, problem):
    words = [w.replace("IMAGE", f"{registry.host}/demo-project/gantry/mine:v1") for w in words]
    result = cli("run", "--detach", "--run-id", "r1", *words, environ=world["environ"])
    assert result.status == ExitStatus.ERROR, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and problem in result.stderr, result.stderr
    assert fake.started == [] and all("gantry-run" not in metadata_items(vm) for vm in world["vms"])


def test_status_of_your_own_program_shows_its_step_and_no_pons(cli, world, tmp_path):
    assert cli("run", "--detach", "--run-id", "r1", "--", "-m", "toytrain.train", environ=world["environ"]).status == 0
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = {"gantry/boot": "ready", "gantry/agent": json.dumps(
            {"state": "running", "run": "r1", "node_rank": rank, "step": None, "figures": {}, "detail": ""})}
    # the agent's report, as it reads it from the program's own records
    step, _ = stats_figures(json.dumps(train_record(12, 0.25, 900.0)) + "\n")
    world["vms"][0]["guestAttributes"]["gantry/agent"] = json.dumps(
        {"state": "running", "run": "r1", "node_rank": 0, "step": step, "figures": {"losses/total": 0.25},
         "detail": "", "heartbeat": int(time.time())})
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout.splitlines()[1].split()[:5] == ["0", "gantry-node-0", "running", "r1", "12"]
    assert "node 0: step 12 | losses/total 0.25" in result.stdout  # no gantry.yaml: its numbers as named
    assert "Pons" not in result.stdout


def test_a_second_run_does_not_silently_replace_the_one_in_progress(cli, fake, world):
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = running_report("r1", rank, 680)
    refused = cli("run", "--detach", "--run-id", "r2", environ=world["environ"])
    assert refused.status == ExitStatus.ERROR
    assert "run r1 on node(s) 0, 1 at step 680 is in progress; starting r2 would stop it" in refused.stderr
    assert "--replace" in refused.stderr and all("gantry-run" not in metadata_items(vm) for vm in world["vms"])
    declined = cli("run", "--detach", "--run-id", "r2", answer="n", environ=world["environ"])
    assert declined.status == ExitStatus.ERROR and "Stop it (final checkpoint) and start r2?" in declined.stdout
    replaced = cli("run", "--detach", "--run-id", "r2", "--replace", environ=world["environ"])
    assert replaced.status == ExitStatus.OK, replaced.output
    assert RunSpec.from_json(metadata_items(world["vms"][0])["gantry-run"]).run_id == "r2"


def test_status_shows_each_node_and_the_kit_trainers_figures_and_pons_errors_as_its_gantry_yaml_names_them(cli, world):
    assert cli("run", "--detach", "--run-id", "r1", environ=world["environ"]).status == ExitStatus.OK
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = running_report("r1", rank, 680 + rank)
    with trainer_stats(f"{world['bucket']}/runs/r1", world["staging"]) as stats:
        stats.record(600, {eval_key("Begin-Easy", "mcts_weak"): 0.05, eval_key("Middle-Medium", "mcts_weak"): 0.12,
                           eval_key("Middle-Medium", "policy_weak"): 0.3}, kind="eval")
        stats.record(680, {"charts/step": 680})
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NODE", "NAME", "STATE", "RUN", "STEP", "HEARTBEAT", "UP", "COST"]
    assert lines[1].split()[:5] == ["0", "gantry-node-0", "running", "r1", "680"]
    assert lines[2].split()[:5] == ["1", "gantry-node-1", "running", "r1", "681"]
    assert "3" in lines[1].split()[5] and lines[1].split()[6:] == ["ago", "0m", "-"]
    assert "node 0: step 680 | games 2,100 | loss 1.200" in result.stdout
    assert "Pons MCTS weak errors at step 600: Begin-Easy 5.0%  Middle-Medium 12.0%" in result.stdout


def test_status_prices_a_million_positions_at_the_masters_pace(cli, world, deployment):
    """What a node shape costs per unit of work, measured on the node rented: C4 and N1 + T4 compare by it."""
    deployment.write(cpu_machine_type="c4-highcpu-8")
    assert cli("run", "--detach", "--run-id", "r1", environ=world["environ"]).status == ExitStatus.OK
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = running_report("r1", rank, 680)
    report = json.loads(world["vms"][0]["guestAttributes"]["gantry/agent"])
    report["figures"][KIT.show["pace"]["key"]] = 1500.0
    world["vms"][0]["guestAttributes"]["gantry/agent"] = json.dumps(report)
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    hourly = cost.estimate(config.load(deployment.tfvars)).node_hourly
    dollars = hourly / (1500.0 * 3600) * 1e6
    line = (f"node 0: ${dollars:.3f} per million self-play positions (1,500 self-play positions/s on node 0 at "
            f"${hourly:.3f}/h a node, list price)")
    assert line in result.stdout, result.stdout
    assert dollars > 0.01  # a c4-highcpu-8 costs cents per million positions at that pace, not fractions of one


def arena_record(elo: float, results: dict[str, tuple[int, int, int, float]]) -> dict[str, float]:
    """An arena record's figures as `selfplay arena` writes them: {opponent: (W, D, L, opponent's Elo)}."""
    figures = {"arena/elo": elo, "arena/elo_sd": 20.0, "arena/games": 100.0, "arena/simulations": 25.0}
    for name, (w, d, losses, rating) in results.items():
        figures.update({arena_key(name, "wins"): w, arena_key(name, "draws"): d, arena_key(name, "losses"): losses,
                        arena_key(name, "elo"): rating, arena_key(name, "score"): (w + d / 2) / (w + d + losses)})
    return figures


def test_status_shows_the_latest_arena_from_the_newest_record_that_holds_it(cli, world, tmp_path):
    assert cli("run", "--detach", "--run-id", "r1", environ=world["environ"]).status == ExitStatus.OK
    for rank, vm in enumerate(world["vms"]):
        vm["status"] = "RUNNING"
        vm["guestAttributes"] = running_report("r1", rank, 680 + rank)
    run_url = f"{world['bucket']}/runs/r1"
    stats_url = f"{kit_run_folder(run_url, world['staging'])[1].url}/stats.jsonl"
    assert list(stats_reports.records_newest_first(stats_url)) == []  # no stats.jsonl yet
    with trainer_stats(run_url, world["staging"]) as stats:
        stats.record(300, arena_record(150.0, {"random": (40, 0, 10, 0.0)}), kind="arena")
        stats.record(600, arena_record(812.4, {"random": (50, 0, 0, 0.0), "mcts1000": (20, 10, 20, 790.0),
                                               "step-300": (30, 5, 15, 640.0)}), kind="arena")
        stats.record(680, {"charts/step": 680})
    records = list(stats_reports.records_newest_first(stats_url))
    assert stats_reports.newest_report(records, "arena/*/draws") == (600, {"random": 0, "mcts1000": 10,
                                                                           "step-300": 5})
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "Arena Elo (random = 0) at step 600: 812\n" in result.stdout
    assert ("Arena score (wins + draws/2) per opponent at step 600: mcts1000 0.50  random 1.00  step-300 0.65"
            in result.stdout)


def test_status_of_a_booting_and_a_stopped_node(cli, world):
    world["vms"][0]["guestAttributes"] = {"gantry/boot": "error: nvidia-smi not found"}
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout.splitlines()[2].split()[:3] == ["1", "gantry-node-1", "terminated"]
    assert "node 0 boot error: nvidia-smi not found" in result.stdout


def test_logs_reads_the_masters_serial_port_and_follows_from_offsets(cli, fake, world, tmp_path):
    serial = tmp_path / "serial-0.log"
    serial.write_text("gantry-agent: started run r1\nstep 10 | games 40\n")
    world["vms"][0]["serialPortFile"] = str(serial)
    result = cli("logs", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert result.stdout == "gantry-agent: started run r1\nstep 10 | games 40\n"
    assert any("/instances/gantry-node-0/serialPort?" in r and "port=2" in r for r in fake.requests)
    result = cli("logs", "--node", "5", environ=world["environ"])
    assert result.status == ExitStatus.ERROR and "--node 5 does not exist. Choose 0..1." in result.stderr


def test_stop_sets_action_stop_on_every_started_node(cli, world, deployment):
    deployment.write()  # the settings `make apply` used: stop says when idle_shutdown_minutes powers the nodes off
    assert cli("run", "--detach", "--run-id", "r2", environ=world["environ"]).status == ExitStatus.OK
    refused = cli("stop", environ=world["environ"])
    assert refused.status == ExitStatus.ERROR and "pass -y to go on" in refused.stderr
    result = cli("stop", "-y", "--no-wait", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    for vm in world["vms"]:
        spec = RunSpec.from_json(metadata_items(vm)["gantry-run"])
        assert spec.action == "stop" and spec.run_id == "r2"
    assert "nothing to stop" in cli("stop", "-y", environ=world["environ"]).stdout
    # the VMs stay up after a stop: it says until when (the agents' idle shutdown, from the tfvars)
    assert re.search(r"The nodes keep billing until their agents power them off, 60 min after the run ends "
                     r"\(idle_shutdown_minutes; about \d\d:\d\d UTC\), or until `make destroy`.", result.stdout)


def test_stop_says_when_the_idle_shutdown_is_off(cli, world, deployment):
    deployment.write(idle_shutdown_minutes=0)
    result = cli("stop", "-y", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "idle_shutdown_minutes = 0 never powers them off. `make destroy` ends it." in result.stdout
    deployment.tfvars.unlink()  # gone since apply: the rule, not a time
    result = cli("stop", "-y", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "until their agents power them off (idle_shutdown_minutes after the run ends)" in result.stdout


def test_fetch_copies_the_whole_run_but_not_partial_uploads_and_then_only_what_changed(cli, world, deployment):
    run, write = f"{world['bucket']}/runs/r3", world["gcs"].write
    write(f"{run}/ckpt-000000040.pt", b"x" * 1000)
    write(f"{run}/stats.jsonl", b'{"step": 40}\n')
    write(f"{run}/tb/events.out.tfevents.1.node", b"e" * 10)
    write(f"{run}/.ckpt-000000050.pt.part", b"half")
    write(f"{run}/tb/.events.out.tfevents.2.node.part", b"half")
    result = cli("fetch", "r3", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    local = deployment.root / "runs" / "r3"
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file()) == [
        "ckpt-000000040.pt", "stats.jsonl", "tb/events.out.tfevents.1.node"]
    assert "Copied 3 file(s)" in result.stdout
    write(f"{run}/stats.jsonl", b'{"step": 40}\n{"step": 50}\n')  # the run goes on: only this grew
    again = cli("fetch", "r3", environ=world["environ"])
    assert "Copied 1 file(s)" in again.stdout and "stats.jsonl" in again.stdout
    missing = cli("fetch", "nope", environ=world["environ"])
    assert missing.status == ExitStatus.ERROR and f"no run at {world['bucket']}/runs/nope" in missing.stderr
    assert f"gsutil ls {world['bucket']}/runs/`" in missing.stderr  # the bucket itself, not BUCKET


@pytest.mark.parametrize("run_id", ["..", ".", "../r3", "-r3"])
def test_fetch_refuses_what_is_not_a_run_id_in_one_line(cli, world, deployment, run_id):
    world["gcs"].write(f"{world['bucket']}/runs/r3/stats.jsonl", b"")
    result = cli("fetch", "--", run_id, environ=world["environ"])
    assert result.status == ExitStatus.ERROR, result.output
    assert result.stderr.splitlines() == [(f"gantry: error: {run_id!r} is not a run id ({RUN_ID_RULE}). Name the run "
                                          "as `make run-gcp` names it (run-YYYYmmdd-HHMMSS), e.g. --run-id my-run-2.")]
    assert not (deployment.root / "runs").exists()


def test_without_a_deployment_the_run_verbs_say_apply_first(cli, deployment):
    apply_outputs_module(deployment.infra, {"bucket": "b"})
    result = cli("status")
    assert result.status == ExitStatus.ERROR
    assert "no deployment found. Run `make apply` first" in result.stderr


def test_run_follows_until_every_node_reports_the_run_done(cli, world):  # finished nodes hold no run
    for rank, vm in enumerate(world["vms"]):
        vm["guestAttributes"] = {"gantry/agent": json.dumps(
            {"state": "finished", "run": "r9", "node_rank": rank, "step": 90, "heartbeat": int(time.time())})}
    result = cli("run", "--run-id", "r9", "--interval", "0.1", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert "[node 0 gantry-node-0] finished" in result.stdout and "[node 1 gantry-node-1] finished" in result.stdout
    assert "Run r9 finished on every node. Copy it here with `make fetch RUN=r9`." in result.stdout


def test_status_restarts_a_preempted_spot_node_so_the_run_resumes(cli, fake, world):
    # Run r1 on two Spot nodes; Google preempted node 1 (TERMINATED), its spec still says start.
    assert cli("run", "--detach", "--run-id", "r1", environ=world["environ"]).status == ExitStatus.OK
    fake.started.clear()
    for rank, vm in enumerate(world["vms"]):
        vm["scheduling"] = {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}
        vm["guestAttributes"] = running_report("r1", rank, 680)
    world["vms"][1]["status"] = "TERMINATED"
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK, result.output
    assert fake.started == ["gantry-node-1"]  # instances.start through the real client
    assert ("node 1 gantry-node-1: Spot VM TERMINATED during run r1: starting it (it bills while it runs); its "
            "program starts again as given, in the same run folder") in result.stdout
    assert result.stdout.splitlines()[3].split()[:4] == ["1", "gantry-node-1", "running", "r1"]
    # Same spec, same launch: the agent that boots starts the trainer on --run.dir again (it resumes there).
    assert RunSpec.from_json(metadata_items(world["vms"][1])["gantry-run"]).action == "start"

    fake.started.clear()  # a stopped run, or an on-demand node, stays off: nothing to resume or not ours to judge
    assert cli("stop", "-y", "--no-wait", environ=world["environ"]).status == ExitStatus.OK
    world["vms"][1]["status"] = "TERMINATED"
    assert cli("status", environ=world["environ"]).status == ExitStatus.OK and fake.started == []


def test_status_starts_no_node_for_a_launch_its_agent_ended_whatever_the_program_wrote(cli, fake, world, gcs, tmp_path):
    # A plain command writes no trainer record; it exited 0 on node 1, whose agent recorded the end in the bucket
    # (gantry_agent.ending, the agent's own writer), then powered the node off idle, its spec still saying start.
    from gantry_agent.ending import Endings

    command = ["--", "python", "train.py"]
    assert cli("run", "--detach", "--run-id", "r2", *command, environ=world["environ"]).status == ExitStatus.OK
    for vm in world["vms"]:
        vm["scheduling"] = {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}
    world["vms"][1]["status"] = "TERMINATED"
    ended = RunSpec.from_json(metadata_items(world["vms"][1])["gantry-run"])
    Endings(str(tmp_path / "agent"), lambda: "token", gcs.url, print).record(ended, "exited", "exit 0")
    fake.started.clear()
    for _ in range(3):  # status after status: the node stays off
        result = cli("status", environ=world["environ"])
        assert result.status == ExitStatus.OK, result.output
        assert fake.started == [] and "starting it" not in result.stdout
        assert "node 1 gantry-node-1: terminated, left off: run r2 ended: its program exited 0 (" in result.stdout

    # the same run resumed is a new launch: a preemption of it is healed again
    assert cli("run", "--detach", "--resume", "r2", *command, environ=world["environ"]).status == ExitStatus.OK
    world["vms"][1]["status"] = "TERMINATED"
    fake.started.clear()
    assert cli("status", environ=world["environ"]).status == ExitStatus.OK and fake.started == ["gantry-node-1"]


def test_status_starts_no_node_for_a_launch_past_its_time_limit(cli, fake, world):
    # node 1 was off when the limit came (its agent could record nothing): the launcher reads the spec's deadline
    assert cli("run", "--detach", "--run-id", "r3", "--max-minutes", "0.001", "--", "python", "train.py",
               environ=world["environ"]).status == ExitStatus.OK
    for vm in world["vms"]:
        vm["scheduling"] = {"provisioningModel": "SPOT"}
    world["vms"][1]["status"] = "TERMINATED"
    fake.started.clear()
    time.sleep(0.1)
    result = cli("status", environ=world["environ"])
    assert result.status == ExitStatus.OK and fake.started == [], result.output
    assert "left off: run r3 reached its time limit (0.001 min, at " in result.stdout


def test_run_and_status_name_make_apply_when_google_deleted_the_nodes(cli, fake, world):
    # termination_action = DELETE: the preempted node is gone; Compute answers its real 404 notFound body.
    fake.instances.remove(world["vms"][1])
    expected = ("gantry: error: node(s) gantry-node-1 (us-central1-a) no longer exist: Google Compute Engine deleted "
                "them (Spot preemption or max_run_hours with termination_action = DELETE). Run `make apply` to create "
                "the nodes again, then `make run-gcp ARGS=\"--resume RUN_ID\"`: the checkpoints are in the bucket.")
    status = cli("status", environ=world["environ"])
    assert status.status == ExitStatus.ERROR
    assert status.stdout.splitlines()[2].split()[:3] == ["1", "gantry-node-1", "deleted"]
    assert status.stderr.strip() == expected and "Traceback" not in status.output
    run = cli("run", "--detach", "--resume", "r1", environ=world["environ"])
    assert run.status == ExitStatus.ERROR and run.stderr.strip() == expected
    assert "gantry-run" not in metadata_items(world["vms"][0])  # refused before any node was written
    logs = cli("logs", "--node", "1", environ=world["environ"])
    assert logs.status == ExitStatus.ERROR and logs.stderr.strip() == expected


@pytest.mark.timeout(90)  # a launcher that never restarts the node would follow forever
def test_following_a_run_restarts_a_node_preempted_meanwhile(cli, fake, world):
    import threading

    for vm in world["vms"]:
        vm["scheduling"] = {"provisioningModel": "SPOT"}

    def preempt_then_finish():  # while `gantry run` follows: Google stops node 1, later the run finishes
        wait_until(lambda: "gantry-run" in metadata_items(world["vms"][1]), timeout=60, what="the launch")
        time.sleep(0.5)
        world["vms"][1]["status"] = "TERMINATED"
        deadline = time.monotonic() + 15
        while "gantry-node-1" not in fake.started and time.monotonic() < deadline:
            time.sleep(0.1)  # a launcher that never restarts it still gets its finish, and fails below
        for rank, vm in enumerate(world["vms"]):
            vm["guestAttributes"] = {"gantry/agent": json.dumps(
                {"state": "finished", "run": "r10", "node_rank": rank, "step": 90, "heartbeat": int(time.time())})}

    world["vms"][1]["status"] = "RUNNING"
    google = threading.Thread(target=preempt_then_finish, daemon=True)
    google.start()
    result = cli("run", "--run-id", "r10", "--interval", "0.2", environ=world["environ"])
    google.join(timeout=10)
    assert result.status == ExitStatus.OK, result.output
    assert fake.started == ["gantry-node-1"]
    assert ("Spot VM TERMINATED during run r10: starting it (it bills while it runs); its program starts again as "
            "given, in the same run folder") in result.stdout
    assert "Run r10 finished on every node." in result.stdout


@pytest.mark.parametrize("flags, limit, expected", [
    ([], None, DEFAULT_RUN_MAX_MINUTES),  # every launch ends by itself
    (["--run.max_minutes=30"], None, DEFAULT_RUN_MAX_MINUTES),  # the trainer's own budget is its own
    ([], 0, 0),  # no limit, said explicitly
])
def test_every_launch_gets_the_default_time_limit_and_the_trainer_flags_stay_its_own(flags, limit, expected):
    cluster = launches.Cluster("p", (launches.Node(0, "n0", "z"),), "10.0.0.2", "r", "b", use_gpu=False)
    words = [*KIT.command, *flags]
    spec = launches.launch_specs(cluster, "r1", "img", words, run_url="gs://b/runs/r1", max_minutes=limit,
                             command=True)[0]
    assert spec.args == tuple(words)
    assert spec.max_minutes == expected and (spec.deadline is None) == (expected == 0)


def test_your_own_torchrun_program_gets_no_selfplay_flags_and_the_same_time_limit():
    cluster = launches.Cluster("p", (launches.Node(0, "n0", "z"),), "10.0.0.2", "r", "b", use_gpu=False)
    spec = launches.launch_specs(cluster, "r1", "img", ["-m", "toytrain.train"], run_url="gs://b/runs/r1", torchrun=True)[0]
    assert spec.args == ("-m", "toytrain.train") and spec.max_minutes == DEFAULT_RUN_MAX_MINUTES


@needs_terraform  # the price comes from infra/terraform.tfvars, which Terraform checks first
def test_status_shows_each_nodes_uptime_and_what_it_cost_since_its_last_start(cli, world, deployment):
    from local_cloud.compute_json import _rfc3339

    deployment.write()  # one c4-highcpu-16 on demand: $0.691/h
    started = time.time() - 2 * 3600 - 10
    world["vms"][0]["lastStartTimestamp"] = _rfc3339(started)
    world["vms"][1]["status"] = "TERMINATED"  # a node that is off bills nothing
    began = time.time()
    lines = cli("status", environ=world["environ"]).stdout.splitlines()
    ended = time.time()
    assert lines[1].split()[:3] == ["0", "gantry-node-0", "booting"] and lines[1].split()[-2] == "2h00m"
    # what it cost up to the moment status asked: a loaded machine may take seconds to ask, and the cents move
    cost = float(lines[1].split()[-1].removeprefix("$"))
    assert round(0.691 * (began - started) / 3600, 2) <= cost <= round(0.691 * (ended - started) / 3600, 2) + 0.01
    assert lines[2].split()[-2:] == ["-", "-"]


def test_stop_power_off_stops_every_vm_once_the_run_stopped(cli, fake, world):
    result = cli("stop", "-y", "--power-off", environ=world["environ"])  # no run: nothing to wait for
    assert result.status == ExitStatus.OK, result.output
    assert sorted(fake.stopped) == ["gantry-node-0"]  # node 1 was already off (TERMINATED)
    assert "node 0 gantry-node-0: powered off, billing only for its disk" in result.stdout
    assert "keep billing" not in result.stdout
    refused = cli("stop", "-y", "--power-off", "--no-wait", environ=world["environ"])
    assert refused.status == ExitStatus.ERROR and "Drop --no-wait" in refused.stderr
