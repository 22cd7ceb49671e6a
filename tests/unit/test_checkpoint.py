"""Atomic checkpoints, newest-k retention, and loud failures instead of silent fresh starts."""

import pytest
import torch
from launch_contract import partial_name
from selfplay import checkpoint
from selfplay.checkpoint import Checkpoint, CheckpointError


def payload(step, channels=8):
    return Checkpoint(step=step, model={"w": torch.full((3,), float(step))},
                      config={"game": {"name": "connect4"}, "model": {"channels": channels, "blocks": 1}})


def test_round_trip_and_keep_newest(tmp_path):
    for step in (10, 20, 30, 40):
        checkpoint.save(tmp_path, payload(step), keep=2)
    names = [p.name for p in checkpoint.list_checkpoints(tmp_path)]
    assert names == ["ckpt-000000030.pt", "ckpt-000000040.pt"]
    loaded = checkpoint.load(checkpoint.resolve(tmp_path))
    assert loaded.step == 40 and loaded.model["w"].tolist() == [40.0] * 3
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary files left behind


def test_every_field_round_trips_as_the_plain_dict_older_runs_wrote(tmp_path):
    full = Checkpoint(step=7, config={"game": {"name": "tictactoe"}}, model={"w": torch.ones(2)},
                      optimizer={"state": {}, "param_groups": []}, scaler={}, ema={"w": torch.zeros(2)},
                      counters={"games": 3}, replay={"z": torch.zeros(4), "added": 4, "trained": 0})
    path = checkpoint.save(tmp_path, full)
    on_disk = torch.load(path, weights_only=True)
    assert isinstance(on_disk, dict) and set(on_disk) == {"step", "config", "model", "optimizer", "scaler", "ema",
                                                          "counters", "replay"}
    loaded = checkpoint.load(path)
    assert (loaded.step, loaded.config, loaded.counters, loaded.scaler) == (7, full.config, {"games": 3}, {})
    assert loaded.playing_weights() is loaded.ema and loaded.replay["added"] == 4
    assert loaded.selfplay_weights() is loaded.model  # the actors play the learner's own weights, not the average
    assert set(loaded.learner_state()) == {"model", "optimizer", "scaler", "ema"}


def test_a_checkpoint_saved_the_old_way_loads(tmp_path):
    """Written before Checkpoint existed: torch.save of a dict with string keys, as train.py saved it (the learner's
    state, step, config, counters, replay), and the minimal model/step/config of older tools; no ema or replay."""
    old = {"model": {"w": torch.full((3,), 2.0)}, "optimizer": {"state": {}, "param_groups": []}, "scaler": {},
           "step": 12, "config": {"game": {"name": "connect4"}}, "counters": {"games": 5, "positions": 80}}
    torch.save(old, tmp_path / "ckpt-000000012.pt")
    torch.save({"model": {"w": torch.ones(1)}, "step": 3, "config": {}, "someday": 1}, tmp_path / "ckpt-000000003.pt")
    loaded = checkpoint.load(checkpoint.resolve(tmp_path))
    assert (loaded.step, loaded.counters, loaded.ema, loaded.replay) == (12, {"games": 5, "positions": 80}, None, None)
    assert loaded.playing_weights() is loaded.model and set(loaded.learner_state()) == {"model", "optimizer", "scaler"}
    minimal = checkpoint.load(tmp_path / "ckpt-000000003.pt")  # unknown keys are ignored, as before
    assert (minimal.step, minimal.optimizer, minimal.counters) == (3, None, {})


def test_truncated_checkpoint_is_an_error_that_names_the_file(tmp_path):
    path = checkpoint.save(tmp_path, payload(5))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="ckpt-000000005.pt is corrupt"):
        checkpoint.load(path)


def test_foreign_file_and_empty_dir_are_errors(tmp_path):
    torch.save({"weights": 1}, tmp_path / "ckpt-000000001.pt")
    with pytest.raises(CheckpointError, match="not written by selfplay"):
        checkpoint.load(tmp_path / "ckpt-000000001.pt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no checkpoint"):
        checkpoint.resolve(tmp_path / "empty")


def test_a_differently_shaped_network_is_refused(tmp_path):
    saved = payload(1, channels=8).config
    wanted = {"game": {"name": "connect4"}, "model": {"channels": 16, "blocks": 1}}
    # the line names the flag that resumes it: a user whose run predates a changed default needs no archaeology
    with pytest.raises(CheckpointError, match="model.channels=8 but this run asks for model.channels=16: "
                                              "resume it with --model.channels=8, or a new run.dir"):
        checkpoint.check_compatible(saved, wanted, ("game.name", "model.channels"), tmp_path / "x.pt")


@pytest.fixture
def small_disk(tmp_path):
    """A 256 kB filesystem (tmpfs), as a disk that fills up; needs root to mount, as CI has."""
    import subprocess

    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], capture_output=True, check=False)


def test_a_full_disk_keeps_earlier_checkpoints_and_removes_the_partial_file(small_disk):
    small = Checkpoint(step=1, config={}, model={"w": torch.zeros(1000)})
    first = checkpoint.save(small_disk, small)
    big = Checkpoint(step=2, config={}, model={"w": torch.zeros(200_000)})  # 800 kB: more than the disk
    with pytest.raises(checkpoint.CheckpointError, match=r"disk full at .* \(\d+ MB free, a checkpoint needs about"):
        checkpoint.save(small_disk, big)
    assert sorted(p.name for p in small_disk.iterdir()) == [first.name]  # no .tmp left, the earlier one kept
    assert checkpoint.load(first).step == 1


def test_partial_files_of_a_crash_are_removed_at_start(tmp_path):
    from selfplay.rundir import LOCK_FILE, RunDir

    (tmp_path / ".ckpt-000000040.pt.tmp-1234").write_bytes(b"half")  # the name older runs wrote
    (tmp_path / partial_name("ckpt-000000050.pt")).write_bytes(b"half")  # today's: the contract's partial rule
    (tmp_path / ".notes.part").write_bytes(b"a file of someone else's")  # not a checkpoint: not ours to delete
    (tmp_path / "ckpt-000000030.pt").write_bytes(b"kept")
    RunDir(str(tmp_path)).prepare()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".notes.part", LOCK_FILE, "ckpt-000000030.pt"])
    assert checkpoint.remove_partial(tmp_path) == []
