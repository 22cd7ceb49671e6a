"""The trainer as a user runs it: real processes, real signals, real checkpoints (tic-tac-toe, tiny budgets)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from checkout import REPO
from selfplay.record_keys import END_KIND, EVAL_MINUTE, EVAL_STEP, eval_key
from train_helpers import records, wait_for_steps

pytestmark = pytest.mark.slow

FAST = ["--actors.count=1", "--run.log_every_seconds=1", "--eval.every_minutes=0"]


def selfplay(*args, timeout=240, cwd=None):
    return subprocess.run([sys.executable, "-m", "selfplay", *args], capture_output=True, text=True, timeout=timeout,
                          check=False, cwd=cwd)


def start(*args):
    return subprocess.Popen([sys.executable, "-m", "selfplay", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_train_writes_a_run_then_resumes_at_the_same_step(tmp_path):
    run = tmp_path / "run"
    first = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=60", *FAST)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (run / "ckpt-000000060.pt").is_file() and list((run / "tb").iterdir())
    stats = records(run)
    assert stats and {"charts/positions_per_s", "losses/total", "learner/buffer_size"} <= set(stats[-1])
    firing = [r["learner/value_units_firing"] for r in stats if r["learner/value_units_firing"] is not None]
    assert firing and all(0 < f <= 1 for f in firing)  # a live value head, measured once the learner stepped
    finished = [r for r in stats if r["selfplay/game_length"] is not None]  # windows in which games ended
    assert finished and all(5 <= r["selfplay/game_length"] <= 9 and 0 <= r["selfplay/draw_rate"] <= 1
                            for r in finished)  # tic-tac-toe: 5 to 9 plies
    saved = torch.load(run / "ckpt-000000060.pt", weights_only=True)
    assert saved["step"] == 60 and saved["replay"]["z"].shape[0] > 0
    newest = json.loads((run / "stats.jsonl").read_text().splitlines()[-1])  # the run is over: say so last
    assert (newest["kind"], newest["step"], newest["reason"]) == (END_KIND, 60, "max_steps")

    second = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=90", *FAST)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resumed from" in second.stdout and "at step 60" in second.stdout
    resumed = torch.load(run / "ckpt-000000090.pt", weights_only=True)
    assert resumed["step"] == 90
    assert [r["step"] for r in records(run, kind=END_KIND)] == [60, 90]
    assert resumed["counters"]["games"] >= saved["counters"]["games"]  # counters carry over, not restart
    assert f"({saved['replay']['z'].shape[0]} positions in the buffer)" in second.stdout  # the buffer is warm


# learner: the leaves of every actor are answered by the learner process (the GPU path, here on the CPU)
INFERENCE = pytest.mark.parametrize("inference", ["local", "learner"])


@INFERENCE
def test_sigterm_checkpoints_and_exits_0(tmp_path, inference):
    run = tmp_path / "run"
    proc = start("train", "--config", "tictactoe", f"--run.dir={run}", f"--actors.inference={inference}", *FAST)
    try:
        wait_for_steps(run, 120)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=180)  # a guard against a hang, not a speed limit
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "SIGTERM: stopping actors and writing a final checkpoint" in out
    assert records(run, kind=END_KIND) == []  # stopped, not over: a Spot node stopped like this is started again
    final = sorted(run.glob("ckpt-*.pt"))[-1]
    assert torch.load(final, weights_only=True)["step"] > 0


def actor_pids(parent: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(parent), "-f", "spawn_main"], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


@INFERENCE
def test_a_killed_actor_is_replaced_and_training_goes_on(tmp_path, inference):
    run = tmp_path / "run"
    proc = start("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=150",
                 f"--actors.inference={inference}", *FAST)
    try:
        wait_for_steps(run, 120)
        victims = actor_pids(proc.pid)
        assert victims, "no actor process found"
        os.kill(victims[0], signal.SIGKILL)
        out, _ = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "died with exit code -9; restarted (1/10)" in out
    assert ("leaves are evaluated on the learner's cpu" in out) == (inference == "learner")
    assert ("actors leaves on the learner's cpu, learner" in out) == (inference == "learner")  # train's first line
    assert (run / "ckpt-000000150.pt").is_file()
    assert records(run)[-1]["selfplay/actor_restarts"] == 1


def test_a_corrupt_checkpoint_is_refused_with_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "ckpt-000000010.pt").write_bytes(b"not a checkpoint")
    result = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=5", *FAST)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        (f"selfplay: error: checkpoint {run}/ckpt-000000010.pt is corrupt or not a Gantry checkpoint "
        f"(UnpicklingError): move it aside to resume from the one before it, or start a new run.dir")]
    assert (run / "ckpt-000000010.pt").read_bytes() == b"not a checkpoint"  # nothing lost


def test_run_device_cuda_without_cuda_is_refused_before_the_run_folder_exists(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: run.device=cuda is a valid choice here")
    run = tmp_path / "run"
    result = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.device=cuda", *FAST)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "selfplay: error: run.device=cuda but CUDA cannot run a kernel here: check `nvidia-smi`, or use run.device=cpu"]
    assert not run.exists()  # no folder and no stats.jsonl of a run that never started
    # the first line says which config and which run dir: a misspelt make CONFIG= or RUN_DIR= shows here
    config = REPO / "packages" / "selfplay" / "configs" / "tictactoe.yaml"
    assert result.stdout.splitlines()[0] == f"config {config} (tictactoe), run dir {run}"


def test_a_checkpoint_from_before_wide_heads_and_paced_replay_is_refused_by_name_then_resumes(tmp_path):
    run = tmp_path / "run"
    narrow = ["--model.policy_filters=2", "--model.value_filters=1"]
    first = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=20", *narrow, *FAST)
    assert first.returncode == 0, first.stdout + first.stderr
    # rewrite it as the previous version saved it: no head widths in the config, max_reuse, per-slot uses
    path = run / "ckpt-000000020.pt"
    old = torch.load(path, weights_only=True)
    for key in ("policy_filters", "value_filters"):
        del old["config"]["model"][key]
    old["config"]["learner"] = {"max_reuse": 4, **{k: v for k, v in old["config"]["learner"].items()
                                                   if k not in ("samples_per_position", "window_floor")}}
    del old["replay"]["trained"]
    old["replay"]["uses"] = torch.full((old["replay"]["z"].shape[0],), 4, dtype=torch.int32)
    torch.save(old, path)

    refused = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=30", *FAST)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        (f"selfplay: error: checkpoint {path} was trained with model.policy_filters=2 but this run asks for "
        f"model.policy_filters=32: resume it with --model.policy_filters=2, or a new run.dir to start fresh")]
    # what gantry run --resume asks on the laptop before a node starts: the same refusal, then the same fit
    checked = selfplay("check", "--resume", "--config", "tictactoe", f"--run.dir={run}")
    assert (checked.returncode, checked.stderr) == (refused.returncode, refused.stderr)
    fits = selfplay("check", "--resume", "--config", "tictactoe", f"--run.dir={run}", *narrow)
    assert fits.stdout.splitlines()[-1] == "resumes from ckpt-000000020.pt at step 20, its game and net checked"
    resumed = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=30", *narrow, *FAST)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "at step 20" in resumed.stdout and (run / "ckpt-000000030.pt").is_file()


def test_connect4_training_evaluates_periodically_and_eval_cli_grades_the_checkpoint(tmp_path):
    run = tmp_path / "run"
    result = selfplay("train", "--config", "connect4", f"--run.dir={run}", "--model.channels=8",
                      "--model.blocks=1", "--actors.games=16", "--search.simulations=8", "--learner.batch_size=32",
                      "--learner.min_replay=64", "--eval.every_minutes=0.02", "--eval.positions_per_set=10",
                      "--eval.simulations=4", "--run.max_minutes=0.5", "--actors.count=1",
                      "--run.log_every_seconds=1", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    evals = records(run, kind="eval")
    assert evals and eval_key("Begin-Hard", "mcts_weak") in evals[0]
    assert evals[0]["step"] == 0  # the first grades the starting weights, at once
    # each grading names the step and minute it graded, and the progress line repeats them with its figures
    assert all(e[EVAL_STEP] == e["step"] and 0 <= e[EVAL_MINUTE] <= 1 for e in evals)
    assert re.search(r"\| eval weak err of step \d+ \(minute \d+\): mid-med", result.stdout)
    assert re.search(r"^step \d+ \| 0:00:\d\d elapsed, 0:00:\d\d left \| games", result.stdout, flags=re.M)
    graded = selfplay("eval", "--checkpoint", str(run), "--positions", "10", "--simulations", "4",
                      "--json", str(tmp_path / "eval.json"), "--breakdown", "--selfplay-games", "4")
    assert graded.returncode == 0, graded.stderr
    assert "Begin-Hard" in graded.stdout
    assert re.search(r"^Begin-Hard: MCTS-4 errs on \d+ of 10$", graded.stdout, flags=re.M), graded.stdout
    assert graded.stdout.count("  whose judgement   the raw policy errs on") == 6
    data = json.loads((tmp_path / "eval.json").read_text())
    assert 0 <= data["End-Easy"]["mcts_weak"] <= 1 and data["End-Easy"]["positions"] == 10
    # the self-play audit: four games under the run's settings, every move solved
    assert re.search(r"^self-play audit: 4 games, \d+ positions solved in \d+ s; from the empty board", graded.stdout,
                     flags=re.M), graded.stdout
    audited = data["selfplay_audit"]
    assert sum(audited["from_the_empty_board"].values()) + sum(audited["after_a_random_opening"].values()) == 4
    assert all(0 <= audited["changed_by_kind"][kind] <= n for kind, n in audited["moves_by_kind"].items())
    # graded as int8 actors play it: quantized on the leaves of a first search, and the table says so
    int8 = selfplay("eval", "--checkpoint", str(run), "--positions", "10", "--simulations", "4", "--precision", "int8",
                    "--json", str(tmp_path / "int8.json"))
    assert int8.returncode == 0, int8.stderr
    assert re.search(r"^\(MCTS at 4 simulations in int8, graded by bitbully; \d+ s\)$", int8.stdout, flags=re.M)
    assert json.loads((tmp_path / "int8.json").read_text())["_meta"]["precision"] == "int8"
    assert data["_meta"]["precision"] in ("fp32", "bf16")  # auto
    refused = selfplay("eval", "--checkpoint", str(run), "--selfplay-games", "-1")
    assert refused.returncode == 2 and refused.stderr.strip().splitlines() == [
        "selfplay: error: --selfplay-games=-1: give a number of games, or 0 for none"], refused.stderr


@pytest.mark.parametrize("verb", ["train", "check"])
def test_a_bucket_run_dir_is_refused_in_one_line_naming_the_one_store(tmp_path, verb):
    """The trainer writes a local folder; a node's agent is what copies it to the bucket (gantry.yaml's sync): a
    gs:// run.dir, which it once mirrored itself, is refused before anything is written."""
    result = selfplay(verb, "--config", "tictactoe", "--run.dir=gs://runs-bucket/runs/r1", "--run.max_steps=5",
                      cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [(
        "selfplay: error: run.dir gs://runs-bucket/runs/r1 is a URL; the trainer writes a local folder (a node's agent "
        "copies it to the bucket, `make fetch` brings it home): give a folder such as runs/my-run")], result.stderr
    assert list(tmp_path.iterdir()) == []


def test_missing_pons_sets_turn_periodic_evaluation_off_with_one_warning(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "GANTRY_PONS_DIR": str(tmp_path / "no-sets-here")}
    result = subprocess.run([sys.executable, "-m", "selfplay", "train", "--config", "connect4", f"--run.dir={run}",
                             "--model.channels=8", "--model.blocks=1", "--actors.games=8", "--search.simulations=4",
                             "--learner.batch_size=16", "--learner.min_replay=16", "--run.max_steps=3",
                             "--actors.count=1", "--eval.every_minutes=0.01"],
                            capture_output=True, text=True, env=env, timeout=240, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("periodic evaluation is off for this run") == 1


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended; only its entry is left
    except OSError:
        return False


def _wait(predicate, what: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s  # a guard against a hang, not a speed limit
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_killed_trainer_leaves_no_process_and_no_shared_memory_and_resumes(tmp_path):
    run = tmp_path / "run"
    shm_before = set(os.listdir("/dev/shm"))
    proc = start("train", "--config", "tictactoe", f"--run.dir={run}", "--run.checkpoint_every_minutes=0.05",
                 "--eval.every_minutes=0", "--actors.count=1", "--run.log_every_seconds=1")
    try:
        wait_for_steps(run, 120)
        _wait(lambda: list(run.glob("ckpt-*.pt")), "a checkpoint before the kill", 120)
        children = actor_pids(proc.pid)
        segments = set(os.listdir("/dev/shm")) - shm_before
        assert children and segments, (children, segments)
        proc.kill()  # SIGKILL: no handler runs, nothing is stopped in order
        proc.wait(timeout=60)
    finally:
        proc.kill()
    _wait(lambda: not any(_alive(pid) for pid in children), f"actors {children} outlived the killed trainer")
    _wait(lambda: not segments & set(os.listdir("/dev/shm")), f"shared memory {segments} outlived the trainer")
    step = max(int(p.stem.split("-")[1]) for p in run.glob("ckpt-*.pt"))
    resumed = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", f"--run.max_steps={step + 5}", *FAST)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"at step {step} " in resumed.stdout
