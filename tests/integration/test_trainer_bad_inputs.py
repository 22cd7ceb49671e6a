"""What a new user does to the trainer that it must answer in one line and survive: a second trainer on a run folder
in use, a stats.jsonl cut by a crash, Ctrl-C at any moment of start-up. Real processes and signals (tic-tac-toe)."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from selfplay.record_keys import STATS_FILE
from train_helpers import wait_for_steps

pytestmark = pytest.mark.slow

FAST = ["--actors.count=1", "--run.log_every_seconds=1", "--eval.every_minutes=0"]


def selfplay(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "selfplay", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_a_second_trainer_on_a_run_folder_in_use_is_refused_naming_the_first(tmp_path):
    run = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "selfplay", "train", "--config", "tictactoe", f"--run.dir={run}",
                              *FAST], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_steps(run)
        written = (run / STATS_FILE).read_bytes()
        second = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", *FAST, timeout=120)
        assert second.returncode == 2, second.stdout + second.stderr
        assert second.stderr.splitlines() == [
            (f"selfplay: error: run.dir {run} is in use: the trainer PID {first.pid} on {socket.gethostname()} writes "
            "it; wait for it to end (Ctrl-C checkpoints it) or give this run another --run.dir")]
        assert (run / STATS_FILE).read_bytes()[:len(written)] == written  # the first's records, untouched
    finally:
        first.send_signal(signal.SIGINT)
        assert first.wait(timeout=120) == 0
    # the folder is free once its trainer has gone, however it went (the kernel drops the lock)
    resumed = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=1", *FAST)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr


def test_a_stats_line_cut_by_a_crash_is_named_by_plot_and_healed_by_the_next_run(tmp_path):
    run = tmp_path / "run"
    trained = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=20", *FAST)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    stats = run / STATS_FILE
    whole = stats.read_text().splitlines()
    eval_record = {"kind": "eval", "step": 20, "time": time.time(), "eval/minute": 1.0,
                   "eval/Begin-Hard/mcts_weak": 0.25}
    cut = '{"kind": "train", "step": 21, "time": 17'  # the crash came mid-write
    stats.write_text("\n".join([*whole, json.dumps(eval_record), cut]))
    plotted = selfplay("plot", "--run", str(run))
    assert plotted.returncode == 0, plotted.stdout + plotted.stderr
    assert plotted.stderr.splitlines() == [(f"selfplay: warning: {stats} line {len(whole) + 2} is not a JSON record "
                                           "(cut off by a crash mid-write?): skipped")]
    resumed = selfplay("train", "--config", "tictactoe", f"--run.dir={run}", "--run.max_steps=30", *FAST)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (f"{stats}: its last line was cut off (a crash mid-write): dropped its {len(cut)} bytes, so this run's "
            "records start on a line of their own") in resumed.stdout
    records = [json.loads(line) for line in stats.read_text().splitlines()]  # every line whole again
    assert records[len(whole)] == eval_record and records[-1]["step"] >= 30


@pytest.mark.parametrize("after_s", [0.1, 0.5, 2.0, 5.0])  # 0.1: in the imports
def test_ctrl_c_at_any_moment_of_start_up_is_one_line(tmp_path, after_s):
    trainer = subprocess.Popen([sys.executable, "-m", "selfplay", "train", "--config", "tictactoe",
                                f"--run.dir={tmp_path / 'run'}", *FAST], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    trainer.send_signal(signal.SIGINT)
    out, err = trainer.communicate(timeout=120)
    if "Traceback" in err and trainer.returncode in (1, -signal.SIGINT):
        # Ctrl-C before the interpreter reached selfplay's first line (its start-up, site, runpy) is Python's own;
        # from that line on it is the one line below
        frames = re.findall(r'File "([^"]+)"', err)
        assert not [f for f in frames if f"{os.sep}selfplay{os.sep}" in f], err
        return
    assert "Traceback" not in out + err and "FakeTensor" not in out + err, out + err
    # before the trainer's own handler: the dispatcher's one line, and exit 130; now and then (1 in about 16 CI
    # runs) the process is reported killed by SIGINT instead, the line printed whole (cause not yet found)
    if trainer.returncode in (130, -signal.SIGINT):
        assert err.splitlines() == [("selfplay: train stopped by Ctrl-C during start-up, before its first checkpoint: "
                                    "nothing of this session was written; run it again to start (or resume)")], err
    else:  # the trainer's handler was in place: it stopped in order, with its own line
        assert trainer.returncode == 0 and "SIGINT: stopping actors and writing a final checkpoint" in out, out + err
        assert err.strip() == "", err


def test_ctrl_c_while_the_dispatcher_itself_imports_is_the_same_one_line():
    """The window a timer cannot aim at (CI hit it once at 0.1 s): KeyboardInterrupt raised by the dispatcher's own
    first import, as SIGINT would raise it there."""
    hook = ("import builtins, runpy, sys\n"
            "real = builtins.__import__\n"
            "def interrupted(name, *a, **k):\n"
            "    if name == 'argparse':\n"
            "        raise KeyboardInterrupt\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = interrupted\n"
            "sys.modules.pop('argparse', None)\n"
            "sys.argv = ['selfplay', 'train']\n"
            "runpy.run_module('selfplay', run_name='__main__')\n")
    result = subprocess.run([sys.executable, "-c", hook], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 130 and result.stderr.splitlines() == [
        ("selfplay: train stopped by Ctrl-C during start-up, before its first checkpoint: nothing of this session "
         "was written; run it again to start (or resume)")], result.stderr


def test_ctrl_c_that_python_wraps_while_a_dataclass_is_made_is_the_same_one_line(monkeypatch, capsys):
    """CI hit it at 0.5 s: SIGINT inside a config dataclass's field (__set_name__) while selfplay.config imports, which
    Python re-raises as RuntimeError("Error calling __set_name__ ...") caused by the KeyboardInterrupt."""
    import selfplay.__main__ as dispatcher

    def interrupted_import(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance 'positions_per_set'") from interrupt

    monkeypatch.setattr(dispatcher, "dispatch", interrupted_import)
    assert dispatcher.main(["train"]) == 130
    assert capsys.readouterr().err.splitlines() == [
        ("selfplay: train stopped by Ctrl-C during start-up, before its first checkpoint: nothing of this session "
         "was written; run it again to start (or resume)")]

    def broken(argv):
        raise RuntimeError("a bug, not a Ctrl-C")

    monkeypatch.setattr(dispatcher, "dispatch", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        dispatcher.main(["train"])
