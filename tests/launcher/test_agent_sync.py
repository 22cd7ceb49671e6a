"""A run's --sync folders in the bucket (gantry_agent.sync, .storage, .outputs): restore before the start, copies of
what changed while the program runs, the final copy at a stop. The bucket is fake-gcs-server (packages/local_cloud/storage.py)
behind the agent's own JSON API client; fake_storage stands in where a test needs what the emulator does not give:
pages of a chosen size and the bearer token (it takes any), and Google's 403 and 404 error bodies (it has no IAM,
and answers a missing bucket with its own body). No process: tests/launcher/test_agent_command.py runs the whole
agent."""

from __future__ import annotations

import io
import os
import tarfile
import time

from fake_storage import FakeStorage
from gantry_agent.outputs import RunOutputs
from gantry_agent.settings import Settings
from gantry_agent.sync import FolderSync, local_folder
from launch_contract import LAST_LINE_CHARS, SPOT_NOTICE_SECONDS, RunSpec, sync_url

IMAGE = "repo/project@sha256:abc"


def command_spec(run_dir: str, **extra) -> RunSpec:
    return RunSpec(run_id="r1", image=IMAGE, node_rank=1, nnodes=2, master_addr="10.0.0.2", command=True,
                   args=("python", "train.py"), run_dir=run_dir, **extra)


def write(path, text: str, mtime: float | None = None) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        out.write(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_a_bucket_restores_what_the_folder_lacks_and_keeps_what_the_program_wrote_since(tmp_path, gcs):
    gcs.create_bucket("runs-bucket")
    bucket, local = sync_url("gs://runs-bucket/runs/r1", 1, "ckpt"), tmp_path / "run" / "sync" / "ckpt"
    for name, data in (("step-1.pt", b"one"), ("sub/step-2.pt", b"two"), ("latest", b"step-1")):
        gcs.write(f"{bucket}/{name}", data)
    # the program's newer file (the bucket's were written just now), its last copy lost in a preemption
    write(local / "latest", "step-3", mtime=time.time() + 3600)
    folder = FolderSync(str(local), bucket, lambda: "vm-token", gcs.url)
    assert folder.restore() == 2
    assert (local / "step-1.pt").read_text() == "one" and (local / "sub" / "step-2.pt").read_text() == "two"
    assert (local / "latest").read_text() == "step-3"  # newer here: kept, and copied back at the first push
    assert folder.push() == (1, 0) and gcs.read(f"{bucket}/latest") == b"step-3"
    assert folder.push() == (0, 0)  # nothing changed: nothing copied
    assert FolderSync(str(local), bucket, lambda: "", gcs.url).restore() == 0  # a restart writes nothing


def test_a_push_copies_changed_files_and_prunes_what_the_program_pruned_but_never_empties_the_bucket(tmp_path, gcs):
    """#99: whatever the kit's trainer gets, every program gets: its pruned checkpoints go from the bucket too (the
    trainer's own writer prunes its), but a program that empties its folder to start afresh leaves the bucket's
    copy, from which a restarted node restores."""
    gcs.create_bucket("runs-bucket")
    bucket, local = "gs://runs-bucket/runs/r1/sync/node-0/out", tmp_path / "local"
    gcs.write(f"{bucket}/restored.pt", b"0")  # a copy from an earlier node: restored, then this node's to prune
    folder = FolderSync(str(local), bucket, lambda: "", gcs.url)
    assert folder.restore() == 1
    write(local / "a", "1")
    write(local / "b", "1")
    write(local / ".c.pt.part", "ha")  # a checkpoint being written (launch_contract.partial_name): not copied
    assert folder.push() == (2, 0) and ".c.pt.part" not in gcs.names(bucket)
    os.remove(local / ".c.pt.part")
    write(local / "a", "22")  # changed (size and mtime)
    os.remove(local / "b")  # the program deleted an old checkpoint
    os.remove(local / "restored.pt")
    assert folder.push() == (3, 0)  # one copied, two pruned
    assert gcs.names(bucket) == ["a"] and gcs.read(f"{bucket}/a") == b"22"
    assert folder.push() == (0, 0)
    os.remove(local / "a")  # the folder emptied whole: nothing is deleted in the bucket
    assert folder.push() == (0, 0) and gcs.names(bucket) == ["a"]
    gcs.write(f"{bucket}/.c.part", b"half")  # a copy in flight (launch_contract.partial_name): no restore takes it
    assert FolderSync(str(tmp_path / "other"), bucket, lambda: "", gcs.url).restore() == 1


def test_gs_restore_pages_through_objects_list_and_gets_each_with_the_vms_token(tmp_path):
    run_dir = "gs://runs-bucket/runs/r1"
    prefix = "runs/r1/sync/node-1/ckpt/"
    with FakeStorage(buckets={"runs-bucket": []}) as storage:
        storage.page_size = 2  # three objects: two pages, the second asked for with pageToken
        for name in ("step-1.pt", "step-2.pt", "dir/step-3.pt"):
            storage.put("runs-bucket", prefix + name, f"data of {name}".encode(), updated=1000.0)
        storage.put("runs-bucket", "runs/r1/sync/node-0/ckpt/other-node.pt", b"node 0's")  # another prefix
        local = tmp_path / "sync" / "ckpt"
        folder = FolderSync(str(local), sync_url(run_dir, 1, "ckpt"), lambda: "vm-token", storage.endpoint)
        assert folder.restore() == 3
        assert (local / "dir" / "step-3.pt").read_text() == "data of dir/step-3.pt"
        assert not (local / "other-node.pt").exists()
        lists = [r for r in storage.requests if r.startswith("GET /storage/v1/b/runs-bucket/o?")]
        assert len(lists) == 2 and "pageToken=2" in lists[1] and "prefix=runs%2Fr1%2Fsync%2Fnode-1%2Fckpt%2F" in lists[0]
        gets = [r for r in storage.requests if "alt=media" in r]
        assert len(gets) == 3 and all("/o/runs%2Fr1%2Fsync%2Fnode-1%2Fckpt%2F" in r for r in gets)

        write(local / "step-4.pt", "four")
        assert folder.push() == (1, 0)  # the restored files are the bucket's already: only the new one goes
        assert storage.objects[("runs-bucket", prefix + "step-4.pt")] == b"four"
        assert storage.tokens == ["Bearer vm-token"]


def test_a_refused_copy_is_one_line_and_is_tried_again_at_the_next_turn(tmp_path):
    lines = []
    with FakeStorage(buckets={"runs-bucket": []}, forbidden={"runs-bucket"}) as storage:
        spec = command_spec("gs://runs-bucket/runs/r1", sync=("ckpt",), sync_seconds=60)
        outputs = RunOutputs(spec, str(tmp_path), None, lambda: "vm-token", storage.endpoint, lines.append)
        write(tmp_path / "sync" / "ckpt" / "step-1.pt", "one")
        outputs.push("every 60 s")
        (line,) = lines
        assert line.startswith(f"could not copy {tmp_path}/sync/ckpt to gs://runs-bucket/runs/r1/sync/node-1/ckpt "
                               "(every 60 s): HTTP 403: gantry-node@p.iam.gserviceaccount.com does not have "
                               "storage.objects.create access")
        assert line.endswith("; trying again in 60 s")
        storage.forbidden.clear()  # the role granted: the next turn copies what the refused one could not
        outputs.push("every 60 s")
        assert storage.objects[("runs-bucket", "runs/r1/sync/node-1/ckpt/step-1.pt")] == b"one"


def test_an_unreadable_bucket_fails_the_start_rather_than_start_without_the_checkpoints(tmp_path):
    with FakeStorage(buckets={}) as storage:  # no such bucket: objects.list answers 404
        spec = command_spec("gs://gone/runs/r1", sync=("ckpt",))
        outputs = RunOutputs(spec, str(tmp_path), None, lambda: "t", storage.endpoint, print)
        try:
            outputs.restore()
        except Exception as exc:  # noqa: BLE001 (the type is the point: StorageError, which start_container catches)
            assert type(exc).__name__ == "StorageError" and str(exc) == "HTTP 404: The specified bucket does not exist."
        else:
            raise AssertionError("restore of a missing bucket must fail the start")


def test_the_final_copy_and_the_grace_fit_in_a_spot_vms_notice(tmp_path, capsys, gcs):
    """GCE gives a preempted Spot VM 30 s. With --sync folders the grace is cut so that SIGTERM, the grace and the
    final copy (at most sync_final_seconds) fit; the final copy of a few small files takes well under that."""
    settings = Settings({})
    assert settings.stop_grace(syncing=False) == 25  # a run without --sync folders keeps its grace
    grace = settings.stop_grace(syncing=True)
    assert grace == 15 and grace + settings.sync_final_seconds + 5 <= SPOT_NOTICE_SECONDS
    lines = []
    gcs.create_bucket("runs-bucket")
    spec = command_spec("gs://runs-bucket/runs/r1", sync=("ckpt", "logs"))
    outputs = RunOutputs(spec, str(tmp_path), None, lambda: "t", gcs.url, lines.append)
    outputs.restore()
    for i in range(10):  # what the program wrote since the last copy, and at its SIGTERM
        write(local_folder(str(tmp_path), "ckpt") + f"/step-{i}.pt", "x" * 10_000)
        write(local_folder(str(tmp_path), "logs") + f"/events-{i}.log", "y" * 1_000)
    begun = time.monotonic()
    outputs.final(deadline=begun + settings.sync_final_seconds)
    took = time.monotonic() - begun
    assert len(gcs.names("gs://runs-bucket/runs/r1/sync/node-1")) == 20
    assert grace + took < SPOT_NOTICE_SECONDS and took < settings.sync_final_seconds
    assert lines[-1].startswith("final copy of the --sync folders done in ")
    print(f"final copy of 20 small files to fake-gcs-server: {took:.3f} s")


def test_a_final_copy_out_of_time_leaves_the_rest_for_the_copies_before(tmp_path):
    lines = []  # the bucket is never asked to copy: a file:// folder will do
    spec = command_spec(f"file://{tmp_path}/bucket/runs/r1", sync=("ckpt",))
    outputs = RunOutputs(spec, str(tmp_path / "run"), None, lambda: "", "", lines.append)
    outputs.restore()
    write(local_folder(str(tmp_path / "run"), "ckpt") + "/late.pt", "x")
    outputs.final(deadline=time.monotonic() - 1)  # the notice is spent
    assert "copied 0 files" in lines[-2] and lines[-2].endswith("; 1 not copied: out of time")


def test_the_final_copy_is_made_once_a_stop_until_the_program_runs_again(tmp_path):
    """make stop: the stop's final copy, then the launch's end asks for one again; nothing ran between, so nothing
    is copied or said twice. A copy that ran out of time is not the last: the next final copy takes the rest."""
    lines = []
    spec = command_spec(f"file://{tmp_path}/bucket/runs/r1", sync=("ckpt",))
    outputs = RunOutputs(spec, str(tmp_path / "run"), None, lambda: "", "", lines.append)
    outputs.restore()
    write(local_folder(str(tmp_path / "run"), "ckpt") + "/late.pt", "x")
    outputs.final(deadline=time.monotonic() - 1)  # out of time: late.pt left
    outputs.final()
    assert (tmp_path / "bucket/runs/r1/sync/node-1/ckpt/late.pt").read_text() == "x"
    said = len(lines)
    outputs.final()  # the launch's end after the stop
    assert len(lines) == said
    outputs.observe("running", time.monotonic())  # restarted: its next stop copies again
    write(local_folder(str(tmp_path / "run"), "ckpt") + "/later.pt", "y")
    outputs.final()
    assert (tmp_path / "bucket/runs/r1/sync/node-1/ckpt/later.pt").read_text() == "y"
    assert lines[-1].startswith("final copy of the --sync folders done in ")


def test_a_stats_file_in_a_sync_folder_is_read_on_the_host_and_its_step_and_numbers_reported(tmp_path):
    spec = command_spec("", sync=("out",), stats_file="out/stats.jsonl")
    outputs = RunOutputs(spec, str(tmp_path), None, lambda: "", "", print)  # no docker: never asked
    assert outputs.progress() is None  # nothing written yet
    write(local_folder(str(tmp_path), "out") + "/stats.jsonl",
          '{"epoch": 1, "loss": 0.9}\n{"epoch": 2, "loss": 0.7, "eval": {"acc": 0.5}, "tag": "x"}\n{"epo')
    assert outputs.progress() == (2, {"epoch": 2, "loss": 0.7, "eval/acc": 0.5})  # the last whole record


def test_the_kits_trainer_shows_its_train_figures_while_its_newest_record_is_an_evaluation(tmp_path):
    """The kit's trainer is read as any program is (its gantry.yaml's stats and figures): each figure is the newest
    value in the file, the step the newest record's, so an eval or arena line does not blank the train figures."""
    from gantry.launches import program_file
    from selfplay.record_keys import EVAL, LOSS_KEY, eval_key
    from selfplay.stats import RunLog

    kit = program_file.load(program_file.KIT_ROOT)
    spec = command_spec("", sync=kit.sync, stats_file=kit.stats, figures=tuple(kit.figures.items()))
    log = RunLog(local_folder(str(tmp_path), kit.sync[0]), stream=io.StringIO())
    log.record(40, {LOSS_KEY: 1.25, "selfplay/games": 300.0})
    log.record(41, {eval_key("Begin-Hard", "mcts_weak"): 0.2}, kind=EVAL)
    log.close()
    outputs = RunOutputs(spec, str(tmp_path), None, lambda: "", "", print)
    assert outputs.progress() == (41, {"selfplay/games": 300.0, LOSS_KEY: 1.25})


def test_a_stats_file_elsewhere_is_copied_out_of_the_container(tmp_path):
    class Docker:  # `docker cp NAME:PATH -` answers a tar archive
        def copy_out(self, name, path):
            self.asked = (name, path)
            data, archive = b'{"step": 7, "reward": 1.5}', io.BytesIO()
            with tarfile.open(fileobj=archive, mode="w") as tar:
                info = tarfile.TarInfo("metrics.json")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            return archive.getvalue()

    docker = Docker()
    outputs = RunOutputs(command_spec("", stats_file="logs/metrics.json"), str(tmp_path), docker, None, "", print)
    outputs.workdir = "/workspace"
    assert outputs.progress() == (7, {"step": 7, "reward": 1.5})
    assert docker.asked == ("gantry-run-r1-1", "/workspace/logs/metrics.json")


def test_the_last_line_is_the_end_of_the_newest_non_empty_line_as_a_progress_bar_last_drew_it(tmp_path):
    outputs = RunOutputs(command_spec(""), str(tmp_path), None, None, "", print)
    outputs.saw("epoch 1:  10%|#  | 1/10\repoch 1:  90%|#########  | 9/10\n")
    assert outputs.last_line == "epoch 1:  90%|#########  | 9/10" and outputs.last_line_at is not None
    outputs.saw("   \n")  # blank: the line before stays the newest
    outputs.saw("x" * 300 + "END\n")
    assert outputs.last_line == ("x" * 300 + "END")[-LAST_LINE_CHARS:] and len(outputs.last_line) == LAST_LINE_CHARS
