"""What the process-level trainer tests share: reading a run's stats and waiting for its first steps."""

import json
import time
from pathlib import Path


def records(run_dir, kind="train") -> list[dict]:
    lines = (Path(run_dir) / "stats.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def wait_for_steps(run_dir, timeout: float = 180, after: int = 0) -> None:
    """Until rank 0's stats.jsonl shows a learner step past ``after`` (a resumed run's), so a signal lands
    mid-training."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (Path(run_dir) / "stats.jsonl").is_file() and any(r["charts/step"] > after for r in records(run_dir)):
            return
        time.sleep(0.5)
    raise AssertionError(f"no learner step in {run_dir} within {timeout:.0f} s")
