"""The names of the selfplay trainer's records (stats.jsonl lines, TensorBoard tags): its own schema, which no other
package reads. `gantry status` shows some of them only because the kit's gantry.yaml names them, as any project's
gantry.yaml names its own (tests/unit/test_program_file.py holds the two to each other). Stdlib only: no torch."""

from __future__ import annotations

STATS_FILE = "stats.jsonl"  # in run.dir: one JSON object a line, the newest last (the kit's gantry.yaml: stats)
KIND_KEY, STEP_KEY = "kind", "step"  # every record's kind (TRAIN_KIND, EVAL, ARENA, END_KIND) and learner step
TRAIN_KIND = "train"  # the progress record, every few seconds
DEFAULT_CONFIG = "connect4"  # the packaged config `selfplay train`, `launch` and `check` use unless told
END_KIND = "end"  # the record the trainer writes last when it reached its budget (its reason)
EVAL = "eval"  # namespace (and record kind) of evaluation figures: eval/<set>/<measure>
ARENA = "arena"  # namespace (and record kind) of arena figures: arena/<opponent>/<measure>

# The progress record's headline figures, read beyond the module that writes them (stats.progress_line, make bench,
# the GPU check, the kit's gantry.yaml): metrics.py writes every key, these are the ones another module names.
STEP_CHART_KEY = "charts/step"
POSITIONS_PER_S_KEY = "charts/positions_per_s"  # the self-play pace: what a million positions cost on a node
SIMULATIONS_PER_S_KEY = "charts/simulations_per_s"
LEARNER_STEPS_PER_S_KEY = "charts/learner_steps_per_s"
ELAPSED_MINUTES_KEY, REMAINING_MINUTES_KEY = "charts/elapsed_minutes", "charts/remaining_minutes"  # the budget's
GAMES_KEY, POSITIONS_KEY = "selfplay/games", "selfplay/positions"  # the session's totals (resumed runs carry them)
# of the games finished in the window: what users of self-play trainers watch for collapse
GAME_LENGTH_KEY, DRAW_RATE_KEY = "selfplay/game_length", "selfplay/draw_rate"
LOSS_KEY, POLICY_LOSS_KEY, VALUE_LOSS_KEY = "losses/total", "losses/policy", "losses/value"
BUFFER_SIZE_KEY = "learner/buffer_size"  # positions in the replay buffer
WAIT_REASON_KEY = "learner/wait_reason"  # why the learner waited, when it did
# each progress window's share of time the learner waited for self-play, and the samples trained so far per
# recorded position (learner.samples_per_position while self-play is the one behind): make bench reads them
WAIT_FRACTION_KEY = "learner/wait_fraction"
SAMPLES_PER_POSITION_KEY = "learner/mean_reuse"
# what ran the actors' net and in what numbers, as train's first line names it ("onnxruntime/int8", "torch/bf16",
# "leaves on the learner's cpu"): in every progress record, so make bench's result and make compare can say which
ACTOR_NET_KEY = "actors/net"
EVAL_STEP = f"{EVAL}/step"  # the learner step whose weights an evaluation graded
EVAL_MINUTE = f"{EVAL}/minute"  # and the minute of this session it took them


def eval_key(test_set: str, measure: str) -> str:
    """stats.jsonl / TensorBoard key of one evaluation figure: eval/<set>/<measure> (mcts_weak, policy_strong, ...)."""
    return f"{EVAL}/{test_set}/{measure}"


def eval_figures(record: dict, measure: str = "mcts_weak") -> dict[str, float]:
    """{set: value} of one measure in a stats.jsonl record (empty for records without an evaluation)."""
    figures = {}
    for key, value in record.items():
        namespace, _, rest = key.partition("/")
        test_set, _, kind = rest.rpartition("/")
        if namespace == EVAL and kind == measure and isinstance(value, (int, float)):
            figures[test_set] = float(value)
    return figures


def arena_key(opponent: str, measure: str) -> str:
    """stats.jsonl / TensorBoard key of one arena figure: arena/<opponent>/<measure>. An "arena" record holds, for
    the run's newest checkpoint (the record's step): arena/elo, arena/elo_sd (Elo where random = 0, its standard
    error), arena/games, arena/simulations, and per opponent (random, greedy, minimax<k>, mcts<n>, step-<N>) its elo,
    wins, draws, losses, score ((W + D/2) / games), score_low and score_high (Wilson 95%)."""
    return f"{ARENA}/{opponent}/{measure}"


def arena_figures(record: dict) -> dict[str, dict[str, float]]:
    """{opponent: {measure: value}} of an arena record (empty for other records)."""
    figures: dict[str, dict[str, float]] = {}
    if record.get(KIND_KEY) != ARENA:
        return figures
    for key, value in record.items():
        namespace, _, rest = key.partition("/")
        opponent, _, measure = rest.rpartition("/")
        if namespace == ARENA and opponent and isinstance(value, (int, float)):
            figures.setdefault(opponent, {})[measure] = float(value)
    return figures
