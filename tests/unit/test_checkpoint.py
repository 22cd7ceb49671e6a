"""Atomic checkpoints, newest-k retention, and loud failures instead of silent fresh starts."""

import pytest
import torch
from selfplay import checkpoint
from selfplay.checkpoint import CheckpointError


def payload(step, channels=8):
    return {"model": {"w": torch.full((3,), float(step))}, "step": step,
            "config": {"game": {"name": "connect4"}, "model": {"channels": channels, "blocks": 1}}}


def test_round_trip_and_keep_newest(tmp_path):
    for step in (10, 20, 30, 40):
        checkpoint.save(tmp_path, step, payload(step), keep=2)
    names = [p.name for p in checkpoint.list_checkpoints(tmp_path)]
    assert names == ["ckpt-000000030.pt", "ckpt-000000040.pt"]
    loaded = checkpoint.load(checkpoint.resolve(tmp_path))
    assert loaded["step"] == 40 and loaded["model"]["w"].tolist() == [40.0] * 3
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary files left behind


def test_truncated_checkpoint_is_an_error_that_names_the_file(tmp_path):
    path = checkpoint.save(tmp_path, 5, payload(5))
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
    saved = payload(1, channels=8)["config"]
    wanted = {"game": {"name": "connect4"}, "model": {"channels": 16, "blocks": 1}}
    with pytest.raises(CheckpointError, match="model.channels=8 but this run asks for model.channels=16"):
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
    small = {"model": {"w": torch.zeros(1000)}, "step": 1, "config": {}}
    first = checkpoint.save(small_disk, 1, small)
    big = {"model": {"w": torch.zeros(200_000)}, "step": 2, "config": {}}  # 800 kB: more than the disk
    with pytest.raises(checkpoint.CheckpointError, match=r"disk full at .* \(\d+ MB free, a checkpoint needs about"):
        checkpoint.save(small_disk, 2, big)
    assert sorted(p.name for p in small_disk.iterdir()) == [first.name]  # no .tmp left, the earlier one kept
    assert checkpoint.load(first)["step"] == 1


def test_partial_files_of_a_crash_are_removed_at_start(tmp_path):
    from selfplay.rundir import RunDir

    (tmp_path / ".ckpt-000000040.pt.tmp-1234").write_bytes(b"half")
    (tmp_path / "ckpt-000000030.pt").write_bytes(b"kept")
    RunDir(str(tmp_path)).prepare()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-000000030.pt"]
    assert checkpoint.remove_partial(tmp_path) == []
