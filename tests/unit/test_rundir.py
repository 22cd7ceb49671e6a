"""A run directory in a bucket: what the trainer mirrors up, to fake-gcs-server through gcsfs (tests/gcs_server.py)."""

from selfplay.rundir import RunDir
from selfplay.stats import RunLog


def test_push_mirrors_checkpoints_stats_and_the_tensorboard_events_that_changed(tmp_path, gcs):
    gcs.create_bucket("runs-bucket")
    remote = "gs://runs-bucket/runs/r1"
    run = RunDir(remote, staging_root=str(tmp_path / "staging"))
    log = RunLog(run.local)  # the trainer's own writer: stats.jsonl and tb/ events
    log.record(10, {"losses/total": 1.5})
    log._tb.flush()
    ckpt = run.local / "ckpt-000000010.pt"
    ckpt.write_bytes(b"weights")
    run.push(ckpt, run.local / "stats.jsonl")
    names = gcs.names(remote)
    events = [name for name in names if name.startswith("tb/events.out.tfevents.")]
    assert gcs.read(f"{remote}/ckpt-000000010.pt") == b"weights" and "stats.jsonl" in names
    assert len(events) == 1 and gcs.read(f"{remote}/{events[0]}")
    assert not [name for name in names if name.rsplit("/", 1)[-1].startswith(".")], "no half-uploaded files stay"

    first_size = len(gcs.read(f"{remote}/{events[0]}"))
    log.record(20, {"losses/total": 1.2})
    log.close()
    run.push(run.local / "stats.jsonl")
    assert len(gcs.read(f"{remote}/{events[0]}")) > first_size, "the grown event file is copied up again"
    assert gcs.read(f"{remote}/stats.jsonl").count(b"\n") == 2


def test_pull_on_a_fresh_machine_brings_the_newest_checkpoint_and_stats(tmp_path, gcs):
    gcs.create_bucket("runs-bucket")
    url = "gs://runs-bucket/runs/r2"
    first = RunDir(url, staging_root=str(tmp_path / "machine-1"))
    first.local.mkdir(parents=True)
    for step in (10, 20):
        (first.local / f"ckpt-{step:09d}.pt").write_bytes(b"w%d" % step)
    (first.local / "stats.jsonl").write_text('{"step": 20}\n')
    first.push(first.local / "ckpt-000000010.pt", first.local / "ckpt-000000020.pt", first.local / "stats.jsonl")
    second = RunDir(url, staging_root=str(tmp_path / "machine-2"))
    second.pull()
    assert sorted(p.name for p in second.local.iterdir()) == ["ckpt-000000020.pt", "stats.jsonl"]


def test_a_run_that_records_nothing_leaves_no_empty_event_file(tmp_path):
    """A resume refused before the first record (another net shape, a corrupt checkpoint) adds no tb/ file."""
    RunLog(tmp_path / "refused").close()
    assert not (tmp_path / "refused" / "tb").exists()


def test_a_run_dir_that_cannot_be_written_is_one_line_before_anything_starts(tmp_path):
    import pytest
    from selfplay.errors import ConfigError

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    with pytest.raises(ConfigError, match="a file stands where the folder should be; choose another --run.dir"):
        RunDir(str(a_file / "run")).prepare()
    with pytest.raises(ConfigError, match=r"cannot be written \(.*\): choose a folder you can write"):
        RunDir("/proc/gantry-run").prepare()  # a read-only place, even for root
    assert a_file.read_text() == "mine"
