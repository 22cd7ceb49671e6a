"""What a run reports: stats.jsonl (one JSON object per record), TensorBoard events, a progress line.

Keys use TensorBoard's namespaces (charts/, losses/, selfplay/, learner/, eval/) in both
files, so a plot of stats.jsonl and TensorBoard agree. Only rank 0 writes.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from .record_keys import (
    BUFFER_SIZE_KEY,
    DRAW_RATE_KEY,
    ELAPSED_MINUTES_KEY,
    EVAL_MINUTE,
    EVAL_STEP,
    GAME_LENGTH_KEY,
    GAMES_KEY,
    KIND_KEY,
    LOSS_KEY,
    POLICY_LOSS_KEY,
    POSITIONS_PER_S_KEY,
    REMAINING_MINUTES_KEY,
    SAMPLES_PER_POSITION_KEY,
    SIMULATIONS_PER_S_KEY,
    STATS_FILE,
    STEP_CHART_KEY,
    STEP_KEY,
    TRAIN_KIND,
    VALUE_LOSS_KEY,
    WAIT_FRACTION_KEY,
    WAIT_REASON_KEY,
    eval_key,
)

# The records' names are the trainer's own (record_keys.py): the node's agent and `gantry status` read the file as
# any program's --stats file, showing what the kit's gantry.yaml names.


class RunLog:
    def __init__(self, run_dir: str | Path, enabled: bool = True, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stdout
        self.dir = Path(run_dir)
        self._tb = None  # opened at the first figure: a run refused at resume leaves no empty event file
        self._tb_missing = False
        self._jsonl = None
        if enabled:
            self.dir.mkdir(parents=True, exist_ok=True)
            dropped = heal(self.dir / STATS_FILE)
            if dropped:
                self.say(f"{self.dir / STATS_FILE}: its last line was cut off (a crash mid-write): dropped its "
                         f"{dropped} bytes, so this run's records start on a line of their own")
            # Open for the run's life (closed by close()); line-buffered: a crash loses nothing.
            self._jsonl = open(self.dir / STATS_FILE, "a", buffering=1)  # noqa: SIM115

    def _events(self):
        """The TensorBoard writer, opened on first use (None without tensorboard)."""
        if self._tb is None and not self._tb_missing and self.enabled:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self._tb = SummaryWriter(str(self.dir / "tb"))
            except ImportError:  # tensorboard is a base dependency; a trimmed install still trains
                self._tb_missing = True
                self.say("tensorboard is not installed: writing stats.jsonl only")
        return self._tb

    def say(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.stream, flush=True)

    def record(self, step: int, metrics: dict[str, float | str], kind: str = TRAIN_KIND) -> None:
        if not self.enabled:
            return
        clean = {k: v if isinstance(v, str) else float(v) if isinstance(v, (int, float)) and math.isfinite(v)
                 else None for k, v in metrics.items()}
        self._jsonl.write(json.dumps({KIND_KEY: kind, STEP_KEY: step, "time": round(time.time(), 3), **clean}) + "\n")
        events = self._events()
        if events is not None:
            for k, v in clean.items():
                if isinstance(v, float):
                    events.add_scalar(k, v, step)

    def hparams(self, config_yaml: str) -> None:
        events = self._events()
        if events is not None:
            events.add_text("config", "```yaml\n" + config_yaml + "\n```", 0)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None


def heal(path: Path) -> int:
    """Cut a stats.jsonl back to its last whole line: a crash mid-write leaves half a record, onto which the next
    run's first record would be appended. The bytes dropped (0: nothing to heal)."""
    try:
        with open(path, "rb+") as stats:
            size = stats.seek(0, 2)
            if not size:
                return 0
            stats.seek(max(0, size - 65536))
            tail = stats.read()
            if tail.endswith(b"\n"):
                return 0
            end = size - len(tail) + tail.rfind(b"\n") + 1 if b"\n" in tail else 0
            stats.truncate(end)
            return size - end
    except FileNotFoundError:
        return 0


def read_records(path: Path, stream=None) -> list[dict]:
    """The records of a stats.jsonl. A line that is not one (cut off by a crash mid-write) is named, file and line,
    in one warning and skipped: one bad line costs a record, not the plot or the bench's grading."""
    records = []
    for number, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            record = False
        if isinstance(record, dict):
            records.append(record)
        elif record is not None:
            print(f"selfplay: warning: {path} line {number} is not a JSON record (cut off by a crash mid-write?): "
                  "skipped", file=stream or sys.stderr, flush=True)
    return records


def human(n: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:.0f}"


def clock(minutes: float) -> str:
    """H:MM:SS, the way a person reads a duration at a glance."""
    seconds = max(0, round(60 * minutes))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def progress_line(m: dict, last_eval: dict | None) -> str:
    """One line a person can read: where the run is, how long it has run and has left, how fast, whether the
    learner waits, how good (and which step and minute that grade is of: it is minutes old between gradings)."""
    games = f"games {human(m[GAMES_KEY])}"
    if m.get(GAME_LENGTH_KEY) is not None:  # of the games finished since the last line
        games += f" ({m[GAME_LENGTH_KEY]:.0f} plies, {100 * m[DRAW_RATE_KEY]:.0f}% drawn)"
    when = f"{clock(m[ELAPSED_MINUTES_KEY])} elapsed"
    if m.get(REMAINING_MINUTES_KEY) is not None:  # only with a budget (run.max_minutes or run.max_steps)
        when += f", {clock(m[REMAINING_MINUTES_KEY])} left"
    parts = [f"step {m[STEP_CHART_KEY]:.0f}",
             when,
             games,
             f"{human(m[POSITIONS_PER_S_KEY])} pos/s",
             f"{human(m[SIMULATIONS_PER_S_KEY])} sims/s",
             f"buffer {human(m[BUFFER_SIZE_KEY])} ({m[SAMPLES_PER_POSITION_KEY]:.1f} samples/position)",
             ]
    if m.get(LOSS_KEY) is not None:
        parts.append(f"loss {m[LOSS_KEY]:.3f} (pi {m[POLICY_LOSS_KEY]:.3f} v {m[VALUE_LOSS_KEY]:.3f})")
    waiting = m.get(WAIT_FRACTION_KEY, 0.0)
    if waiting > 0.2:
        parts.append(f"learner waits {100 * waiting:.0f}% ({m.get(WAIT_REASON_KEY, 'no data')})")
    if last_eval:
        hard = last_eval.get(eval_key("Begin-Hard", "mcts_weak"))
        mid = last_eval.get(eval_key("Middle-Medium", "mcts_weak"))
        if hard is not None:
            parts.append(f"eval weak err of step {last_eval[EVAL_STEP]:.0f} (minute {last_eval[EVAL_MINUTE]:.0f}): "
                         f"mid-med {100 * mid:.1f}% begin-hard {100 * hard:.1f}%")
    return " | ".join(parts)
