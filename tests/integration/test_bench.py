"""`make bench` end to end on tiny budgets: it measures and writes the JSON the README's table comes from."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_quick_bench_writes_throughput_json():
    before = set((ROOT / "bench/results").glob("bench-*.json"))
    result = subprocess.run([sys.executable, "-m", "bench.run", "--quick"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    new = set((ROOT / "bench/results").glob("bench-*.json")) - before
    assert len(new) == 1
    path = new.pop()
    try:
        report = json.loads(path.read_text())
        sp = report["selfplay"][0]
        assert sp["simulations_per_s"] > 0 and 0 <= sp["outside_forward_share"] <= 1
        assert sp["mean_batch"] > 1  # leaves of many games share one forward pass
        assert report["learner"][0]["samples_per_s_auto"] > 0
        assert [r["ranks"] for r in report["scaling"]] == [1, 2] and report["scaling"][1]["positions_per_s"] > 0
        placement = report["inference_placement"]
        assert [r["inference"] for r in placement] == ["local", "learner"]
        assert all(r["positions_per_s"] > 0 and r["learner_steps"] > 0 for r in placement)
    finally:
        path.unlink()
