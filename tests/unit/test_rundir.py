"""The trainer's run folder: a local folder, checked before anything is trained."""

from selfplay.rundir import RunDir
from selfplay.stats import RunLog


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
