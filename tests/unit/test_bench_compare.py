"""`python -m bench.compare` (`make compare`), through its command line, on results `make bench` wrote
(bench/results/): the counts bench/RESULTS.md quotes come out of it, results from two CPUs are flagged, runs of other
lengths are lined up over the minutes both reached, and a file that is not a graded result is refused in one line."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from selfplay.record_keys import ACTOR_NET_KEY
from suite_make import MAKE, ROOT, clean_environ

RESULTS = ROOT / "bench" / "results"
# the default's 2-hour control and the falling random-opening fraction, both seed 1337 on the AMX Xeon (RESULTS.md,
# 2026-12-05), the default's 2 hours on a bf16 EPYC and its 30 minutes on an AVX2-only one (2026-12-04)
CONTROL, FALLING, EPYC, HALF_HOUR = (RESULTS / f"bench-{stamp}.json" for stamp in
                                     ("20261205-054731", "20261205-030029", "20261204-221753", "20261204-130834"))


def compare(*paths: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "bench.compare", *map(str, paths)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_an_arm_and_its_control_side_by_side_give_the_counts_results_md_quotes():
    result = compare(CONTROL, FALLING)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert not lines[0].startswith("note:")  # one CPU
    assert "| 29.9 (18,474 / 20,529) | 0.5 / 0.5 |" in result.stdout  # minute 30, with both runs' steps
    assert sum(ln.startswith("| ") and "at 600 simulations" in ln for ln in lines) == 2  # near minute 60, and 120
    assert "204596 of 204596 lines won" in result.stdout
    assert lines[-1] == "run 1 below run 2 from minute 30: six-set mean at 16 of 19 checkpoints, Begin-Hard at 12"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_compare_prints_what_the_module_does():
    """`make compare`, as make help shows it, with the suite's own venv."""
    ran = subprocess.run([*MAKE, "-s", "compare", f"ARGS={CONTROL} {FALLING}"], capture_output=True, text=True,
                         timeout=120, check=False, env=clean_environ())
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == compare(CONTROL, FALLING).stdout


def test_results_from_two_cpus_are_flagged_in_the_first_line():
    first = compare(CONTROL, EPYC).stdout.splitlines()[0]
    assert first.startswith("note: these ran on different machines") and "amx_bf16" in first and "EPYC" in first


def test_runs_of_other_lengths_or_checkpoint_intervals_are_lined_up_only_where_both_have_a_checkpoint(tmp_path):
    lines = compare(CONTROL, HALF_HOUR).stdout.splitlines()
    assert ("note: these trained for different times (run 1: 119.9 minutes, run 2: 29.9 minutes): rows and counts "
            "stop at minute 29.9") in lines
    rows = [ln for ln in lines if ln.startswith("| ") and ln[2].isdigit()]
    assert rows[-1].startswith("| 29.9 (18,474 / 6,470) |")  # no row pairs minute 120 with the other's minute 30
    assert not any("simulations" in ln for ln in rows)  # the 2-hour run's 600-simulation grades have no peer
    assert lines[-1] == "run 1 below run 2 from minute 30: six-set mean at 1 of 1 checkpoints, Begin-Hard at 1"

    sparse = tmp_path / "every-ten-minutes.json"  # the control's curve, one checkpoint in two
    report = json.loads(CONTROL.read_text())
    report["training"]["runs"][0]["curve"] = report["training"]["runs"][0]["curve"][1::2]
    sparse.write_text(json.dumps(report))
    assert ("note: run 2's checkpoints are not at run 1's minutes (up to 5.0 minutes apart): its cells are its "
            "nearest checkpoint") in compare(CONTROL, sparse).stdout.splitlines()


def test_each_runs_learner_pace_is_named_where_bench_recorded_it(tmp_path):
    """bench.run.learner_pace's figures (the learner's waits, samples per recorded position) under the rows, for the
    runs whose result has them; results written before bench recorded them print no such line."""
    paced = tmp_path / "paced.json"
    report = json.loads(CONTROL.read_text())
    report["training"]["runs"][0].update(learner_wait_fraction=0.314, samples_per_position=6.0)
    paced.write_text(json.dumps(report))
    lines = compare(paced, FALLING).stdout.splitlines()
    assert ("run 1: the learner waited 31% of the run for self-play and trained 6.0 samples per recorded position"
            in lines)
    assert not any(ln.startswith("run 2: the learner") for ln in lines)


def test_runs_whose_actors_computed_in_other_numbers_are_flagged_where_bench_recorded_them(tmp_path):
    """An int8 arm against a bf16 control on one CPU buys learner steps as a faster CPU would: a note says so, and
    each run's line names its actors; results written before the trainer recorded them stay unflagged."""
    arms = []
    for actors in ("onnxruntime/int8", "torch/bf16"):  # as train's first line names them
        report = json.loads(CONTROL.read_text())
        report["training"]["runs"][0]["final_window"][ACTOR_NET_KEY] = actors
        arms.append(tmp_path / f"{actors.split('/')[1]}.json")
        arms[-1].write_text(json.dumps(report))
    lines = compare(*arms).stdout.splitlines()
    assert lines[0] == ("note: these runs' actors computed in different numbers (run 1: onnxruntime/int8, run 2: "
                        "torch/bf16): minutes are not steps, compare the steps beside them")
    assert lines[1] == "run 1: int8 seed1337 (default, actors onnxruntime/int8)"
    assert not any(ln.startswith("note: these runs' actors") for ln in compare(arms[0], arms[0], FALLING).stdout
                   .splitlines())  # one recorded kind of actors, and one run that predates the record


def test_a_file_that_is_not_a_graded_result_is_refused_in_one_line(tmp_path):
    throughput_only = tmp_path / "bench-throughput.json"
    throughput_only.write_text('{"machine": {}, "selfplay": []}')
    a_list = tmp_path / "list.json"
    a_list.write_text("[1]")
    no_minutes = tmp_path / "no-minutes.json"  # grade_run's curve where the run's stats.jsonl held no times
    report = json.loads(CONTROL.read_text())
    for c in report["training"]["runs"][0]["curve"]:
        c["minutes"] = None
    no_minutes.write_text(json.dumps(report))
    for path, words in ((tmp_path / "missing.json", "cannot read it"), (throughput_only, "no graded training run"),
                        (a_list, "no graded training run"), (no_minutes, "no training minutes")):
        result = compare(CONTROL, path)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.count("\n") == 1 and words in result.stderr and str(path) in result.stderr
