"""A TPU VM's output in the run's bucket folder (gantry_agent.console_log.ConsoleLog) against the Cloud Storage stand-in
(fake_storage: it records each upload and its token, and refuses with Google's 403): the JSON API's simple upload
with the VM's token, whole-object rewrites, and a refused upload that is one line and no crash; the trim past
MAX_BYTES against fake-gcs-server."""

from fake_storage import FakeStorage
from gantry_agent.console_log import ConsoleLog
from launch_contract import console_log_url

RUN_DIR = "gs://runs-bucket/runs/r1"
URL = console_log_url(RUN_DIR, 0)


def console(tmp_path, storage, upload_seconds=0.0) -> ConsoleLog:
    return ConsoleLog(URL, str(tmp_path / "console" / "r1-0.log"), lambda: "vm-token", storage.endpoint,
                      upload_seconds)


def test_lines_reach_the_object_gantry_logs_reads_with_the_vms_token(tmp_path):
    with FakeStorage(buckets={"runs-bucket": []}) as storage:
        log = console(tmp_path, storage)
        log.write("gantry-agent: started run r1\n")
        log.write("step 10 | games 40\n")
        assert storage.objects[("runs-bucket", "runs/r1/logs/node-0.log")] == \
            b"gantry-agent: started run r1\nstep 10 | games 40\n"  # the whole file each time: objects don't append
        assert storage.tokens == ["Bearer vm-token"] * 2


def test_uploads_wait_their_turn_and_flush_sends_the_rest(tmp_path):
    with FakeStorage(buckets={"runs-bucket": []}) as storage:
        log = console(tmp_path, storage, upload_seconds=3600)
        log.write("first\n")
        log.flush()  # the agent's loop and the end of a container flush
        assert storage.objects[("runs-bucket", "runs/r1/logs/node-0.log")] == b"first\n"
        log.write("second\n")  # within the hour since that upload: local only
        assert storage.objects[("runs-bucket", "runs/r1/logs/node-0.log")] == b"first\n"
        log.flush()
        assert storage.objects[("runs-bucket", "runs/r1/logs/node-0.log")] == b"first\nsecond\n"
        log.flush()
        assert len(storage.tokens) == 2  # nothing new: no upload


def test_past_max_bytes_the_oldest_half_goes(tmp_path, gcs):
    gcs.create_bucket("runs-bucket")
    log = ConsoleLog(URL, str(tmp_path / "console" / "r1-0.log"), lambda: "vm-token", gcs.url, 0.0)
    log.MAX_BYTES = 100
    for i in range(12):
        log.write(f"line {i:02d} of the trainer\n")  # 22 bytes a line
    kept = gcs.read(URL).decode()  # fake-gcs-server: the object as the last whole upload left it
    assert kept.startswith("gantry-agent: (earlier output dropped)\n") and kept.endswith("line 11 of the trainer\n")
    assert len(kept) <= 100 and "line 00" not in kept


def test_a_refused_upload_is_one_line_and_the_run_goes_on(tmp_path, capsys):
    with FakeStorage(buckets={"runs-bucket": []}, forbidden={"runs-bucket"}) as storage:
        log = console(tmp_path, storage, upload_seconds=3600)
        log.write("step 1\n")  # the first write uploads at once
        (line,) = capsys.readouterr().out.splitlines()
        assert line.startswith(f"gantry-agent: could not upload the run's output to {URL}: ") and "403" in line
        log.write("step 2\n")  # the failed upload counts as one: the next waits its turn, no storm while refused
        assert capsys.readouterr().out == "" and len(storage.tokens) == 1
        assert (tmp_path / "console" / "r1-0.log").read_text() == "step 1\nstep 2\n"  # kept locally meanwhile
