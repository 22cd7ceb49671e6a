"""distributed.py without a process group: what one process agrees with itself, and how a lost rank is quoted."""

from selfplay.distributed import DistInfo, agree, first_words
from selfplay.errors import LOST_CONTACT
from selfplay.train import lost_rank_line


def test_alone_agree_passes_its_own_answers_through_with_the_checkpoint_step():
    assert agree(True, False, DistInfo(), "cpu", 0.5, 40) == (True, False, 0.5, 40, False)
    assert agree(True, False, DistInfo(), "cpu", 1.0, 40, out_of_time=True)[1::3] == (True, True)
    assert agree(False, True, DistInfo(), "cpu")[3] is None


def test_a_collective_error_is_quoted_by_its_first_sentence_without_gloos_source_location():
    gloo = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:61586: "
            "Connection reset by peer. This is typically caused by a peer process exiting early.\nmore")
    assert first_words(gloo) == "Read error [127.0.0.1]:61586: Connection reset by peer"
    long = "word " * 60
    assert first_words(long, 40) == "word word word word word word word word ..."


def test_the_launch_relay_files_a_killed_ranks_resource_tracker_warnings_and_passes_the_error_line(tmp_path, capsys):
    from selfplay.cli.launch import TorchrunRelay

    tracker = [
        ("/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to "
        "be 1 leaked semaphore objects to clean up at shutdown\n"),
        "  warnings.warn('resource_tracker: There appear to be %d '\n",
        ("/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to "
        "be 2 leaked shared_memory objects to clean up at shutdown\n"),
        "  warnings.warn('resource_tracker: There appear to be %d '\n",
    ]
    error = "selfplay: error: rank 1 lost contact with another rank at step 7 (Connection reset by peer): ...\n"
    report = tmp_path / "report.log"
    relay = TorchrunRelay(iter([*tracker, error]), report)
    relay.run()
    assert capsys.readouterr().err == error  # the exit is the one line
    assert report.read_text() == "".join(tracker) and relay.rank_said_why


def test_the_launch_relay_files_torchs_cpp_log_and_puts_the_failing_ranks_line_before_the_lost_ranks(
        tmp_path, capsys):
    """CI, 2026-12-01: rank 0 failed on run.dir while rank 1 was still connecting; rank 1's gloo error (torch's C++
    log) and its own line came first, above the line that said why."""
    from selfplay.cli.launch import TorchrunRelay

    cpp = ("[E1201 18:48:34.931417204 ProcessGroupGloo.cpp:67] Gloo connectFullMesh failed with [/__w/pytorch/pytorch/"
           "third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n")
    lost = (f"selfplay: error: rank 1 {LOST_CONTACT} while the run started (Connection closed by peer): another rank "
            "failed first and its error says why; fix that, then run the same command again\n")
    cause = "selfplay: error: run.dir /proc/not-writable cannot be written (No such file or directory): ...\n"
    report = tmp_path / "report.log"
    TorchrunRelay(iter([cpp, lost, cause]), report).run()
    assert capsys.readouterr().err == cause + lost
    assert report.read_text() == cpp


def test_a_rank_that_loses_rank_0_before_any_checkpoint_says_there_is_none():
    reset = "[gloo/transport/tcp/pair.cc:537] Read error [10.0.0.2]:4242: Connection reset by peer. This is ..."
    assert lost_rank_line(DistInfo(1, 2, nodes=2), 37, reset, None) == (
        "rank 1 lost contact with another rank at step 37 (Read error [10.0.0.2]:4242: Connection reset by peer): "
        "rank 0 reported no checkpoint, so starting every node again starts the run over from step 0")
    assert lost_rank_line(DistInfo(0, 2, nodes=2), 40, "Connection closed by peer", 40).endswith(
        ": the run resumes from step 40 (ckpt-000000040.pt, written now); start every node again to resume")


def test_a_lost_rank_on_one_machine_says_to_run_the_same_command_again_not_to_start_every_node():
    one_machine = DistInfo(1, 2, nodes=1)
    assert lost_rank_line(one_machine, 37, "Connection reset by peer", None).endswith(
        ": rank 0 reported no checkpoint, so running the same command again starts the run over from step 0")
    assert lost_rank_line(DistInfo(0, 2, nodes=1), 40, "Connection closed by peer", 40).endswith(
        ": the run resumes from step 40 (ckpt-000000040.pt, written now); run the same command again to resume")
