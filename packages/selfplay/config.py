"""Trainer configuration: one dataclass per concern (config_io.py reads and writes them: YAML on disk,
``--section.key=value`` overrides, the dict a checkpoint saves).

Every field carries its default, its type and, for a number, its allowed range (``number(default, low, high)``),
then a docstring. Section.__post_init__ is the one place they are checked: the ranges and choices declared here,
then each section's ``rules`` (what one field's range cannot say). `selfplay check`, `train` and gantry's
pre-flight (which runs `check`) all build the config through it, so they refuse the same values with the same
line, naming the field and what it allows. The resolved config is saved in every checkpoint, and a resumed run
must match it on the fields that shape the model.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from dataclasses import dataclass, field
from typing import Literal, get_args, get_origin

from .errors import ConfigError
from .games import GAMES
from .record_keys import ELAPSED_MINUTES_KEY, REMAINING_MINUTES_KEY

# Arena baselines by name: the config validates eval.arena_baselines with it, players.py builds them from it.
BASELINE = re.compile(r"^(random|greedy|minimax(\d+)|mcts(\d+))$")
BASELINE_HELP = "random, greedy, minimax<depth> (e.g. minimax5), mcts<simulations> (e.g. mcts1000)"
MAX_SEED = 2**32 - 1  # numpy's and torch's seeds are unsigned 32-bit at least; each rank and actor adds to it


def require(ok: bool, message: str) -> None:
    """ConfigError(message) unless ``ok``."""
    if not ok:
        raise ConfigError(message)


@dataclass(frozen=True)
class Range:
    """The values a number field allows: low..high, an end excluded where ``low_open``/``high_open``; ``note``
    says what a special value means (0 = off)."""

    low: float
    high: float
    integer: bool
    low_open: bool = False
    high_open: bool = False
    note: str = ""

    def check(self, where: str, value) -> None:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        require(above and below, f"{where}={value} must be in {self}" + (f" ({self.note})" if self.note else ""))

    def __str__(self) -> str:
        def shown(x: float) -> str:
            return str(int(x)) if x == int(x) else str(x)

        if self.integer:
            return f"{shown(self.low)}..{shown(self.high)}"
        return f"{'(' if self.low_open else '['}{shown(self.low)}, {shown(self.high)}{')' if self.high_open else ']'}"


def number(default: float, low: float, high: float, *, low_open: bool = False, high_open: bool = False,
           note: str = ""):
    """A number field: its default and, beside it, the values it allows (checked by Section.__post_init__)."""
    return field(default=default, metadata={"range": Range(low, high, isinstance(default, int), low_open, high_open,
                                                           note)})


class Section:
    """What every config section shares: __post_init__ checks each field against its declaration (a number's
    range, a Literal's choices), then the section's own ``rules``."""

    def __post_init__(self):
        where = SECTION_NAMES[type(self)]
        hints = type_hints(type(self))
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if get_origin(hints[f.name]) is Literal:
                choices = get_args(hints[f.name])
                require(value in choices, f"{where}.{f.name}={value!r} is not allowed: choose one of "
                                          f"{', '.join(map(str, choices))}")
            elif "range" in f.metadata:
                require(isinstance(value, (int, float)) and not isinstance(value, bool),
                        f"{where}.{f.name}={value!r} must be a number")
                f.metadata["range"].check(f"{where}.{f.name}", value)
        self.rules()

    def rules(self) -> None:
        """What one field's range cannot say: choices from a registry, a pattern, one field against another."""


@functools.cache
def type_hints(cls: type) -> dict:
    """A section's field types (the annotations are strings under ``from __future__ import annotations``)."""
    return typing.get_type_hints(cls)


@dataclass
class GameConfig(Section):
    name: str = "connect4"
    """Which game: connect4 | tictactoe."""

    def rules(self):
        require(self.name in GAMES, f"game.name={self.name!r} is unknown: choose one of {', '.join(sorted(GAMES))}")


@dataclass
class ModelConfig(Section):
    channels: int = number(32, 1, 1024)
    """Width of the residual trunk (filters per conv)."""
    blocks: int = number(4, 0, 64)
    """Residual blocks in the trunk."""
    policy_filters: int = number(32, 1, 1024)
    """1x1 filters of the policy head (AlphaZero.jl uses 32; 2 squeezed the trunk's features through a slit)."""
    value_filters: int = number(32, 1, 1024)
    """1x1 filters of the value head (AlphaZero.jl uses 32; 1 left the value a single feature map)."""


@dataclass
class SearchConfig(Section):
    simulations: int = number(64, 1, 100_000)
    """MCTS simulations per self-play move."""
    c_puct: float = number(1.5, 0, 1000, low_open=True)
    """Exploration constant of PUCT."""
    dirichlet_alpha: float = number(1.0, 0, 1000, low_open=True)
    """Root noise concentration (about 10 / typical number of legal moves)."""
    noise_fraction: float = number(0.25, 0, 1, high_open=True)
    """Share of the root prior replaced by Dirichlet noise in self-play (never in evaluation)."""
    temperature_moves: int = number(12, 0, 1000)
    """Moves played in proportion to visit counts at the start of each game; after that, the most visited."""
    full_search_fraction: float = number(1.0, 0, 1, low_open=True, note="1 = every move in full")
    """Playout-cap randomisation (KataGo): this share of self-play moves get `simulations` with root noise and
    become training positions; the rest get `fast_simulations` without noise and are only played. 1 = off."""
    fast_simulations: int = number(16, 1, 100_000)
    """Simulations of the fast, unrecorded searches (search.full_search_fraction < 1); at most search.simulations."""
    random_opening_fraction: float = number(0.0, 0, 1, note="0 = off")
    """Share of self-play games that open with 1..random_opening_moves uniformly random moves, played but not
    recorded: lopsided early positions that self-play between equals never reaches (the Pons sets' are random)."""
    random_opening_moves: int = number(12, 1, 1000)
    """Most random moves a random opening plays (search.random_opening_fraction > 0)."""


@dataclass
class ActorsConfig(Section):
    count: int = number(0, 0, 1024, note="0 = automatic")
    """Self-play processes; 0 = physical cores - 1, or one per core on 1-2 cores (cgroup and SMT aware)."""
    games: int = number(128, 1, 65536)
    """Games each actor plays in lock-step (the network's batch size in self-play)."""
    restart_limit: int = number(10, 0, 1_000_000)
    """Crashed actors are restarted up to this many times in total before the run stops."""
    precision: Literal["auto", "fp32", "bf16", "int8"] = "auto"
    """Self-play inference on a CPU: auto = int8 where it has VNNI (AVX512-VNNI, AVX-VNNI) and no AMX, else bf16
    where it has bf16 instructions, else fp32; int8 = ONNX Runtime's int8 graph, its ranges measured at each
    weight refresh on the positions just evaluated (2.2x fp32's evaluations/s on an AVX512-VNNI Xeon, 2.1x torch's
    bf16 on an AVX512-BF16 EPYC); grading and the arena never run int8 (bf16 where the CPU has it, else fp32)."""
    runtime: Literal["auto", "torch", "onnxruntime"] = "auto"
    """What runs an actor's forward pass on its core: auto = ONNX Runtime where self-play is fp32 (CPUs without
    bf16; 1.65x eager torch on an AVX2 EPYC), torch where it is bf16 or onnxruntime does not import."""
    inference: Literal["auto", "local", "learner"] = "auto"
    """Who runs the network for the search: local = each actor on its own core; learner = the learner's device
    answers every actor's leaves in one batch (leaf_server.py); auto = learner when it is on a GPU or XLA and the
    actors would search in fp32 (a CPU without bf16 or VNNI), else local (hardware.leaves_served_by_learner)."""


@dataclass
class LearnerConfig(Section):
    batch_size: int = number(256, 1, 65536)
    """Positions per gradient step."""
    lr: float = number(2e-3, 0, 1, low_open=True, high_open=True)
    """AdamW learning rate."""
    weight_decay: float = number(1e-4, 0, 1)
    """AdamW weight decay."""
    warmup_steps: int = number(300, 0, 1_000_000)
    """Steps over which the learning rate ramps up linearly from lr / warmup_steps (0 = none). Without it Adam's
    first full-rate steps silence most of the value head's hidden ReLUs for good (learner.warmup_factor)."""
    replay_capacity: int = number(200_000, 1, 100_000_000)
    """Positions kept in the replay ring buffer (oldest overwritten first)."""
    min_replay: int = number(2_000, 1, 100_000_000)
    """Positions needed before the first step."""
    samples_per_position: float = number(4.0, 0, 1000, low_open=True)
    """Samples trained per position self-play adds: the learner waits when it is further ahead (replay.py)."""
    window_floor: int = number(20_000, 1, 100_000_000)
    """Batches are drawn from at least the newest this many positions (all of them while fewer are held)."""
    window_scale: float = number(4.0, 0, 1e6, low_open=True)
    """Above the floor the sampling window is window_scale * positions_added ** window_exponent (KataGo)."""
    window_exponent: float = number(0.75, 0, 1, low_open=True)
    """How fast the window grows with the data: 1 = linearly (all of it), smaller = older games fade out."""
    lr_schedule: Literal["constant", "cosine"] = "cosine"
    """cosine: decay learner.lr to lr_final_fraction of it over run.max_minutes (or run.max_steps);
    constant when the run has neither budget. The schedule follows this session's budget."""
    lr_final_fraction: float = number(0.1, 0, 1, low_open=True)
    """Learning rate at the end of the budget, as a fraction of learner.lr (cosine schedule)."""
    ema_half_life_steps: int = number(100, 0, 1_000_000, note="0 = no average")
    """Half-life, in learner steps, of the moving average of the weights that is graded, played in the arena and
    saved beside the raw weights (Checkpoint.playing_weights); 0 = none, the raw weights play."""
    value_target: Literal["z", "q", "zq"] = "zq"
    """z = game result, q = search value, zq = their mean (z + q) / 2."""
    publish_every: int = number(20, 1, 1_000_000)
    """Learner steps between publishing weights to the actors. Each publish makes int8 actors quantize the net
    again (~0.14 s, bench/RESULTS.md), so a smaller batch_size wants a larger value to keep their pace."""
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    """auto: bf16 on CPUs with AMX or AVX512-BF16, fp32 on other CPUs; on CUDA bf16 at capability >= 8, else fp16;
    bf16 on XLA."""

    def rules(self):
        require(self.replay_capacity >= self.batch_size,
                f"learner.replay_capacity={self.replay_capacity} must be >= learner.batch_size={self.batch_size}")
        require(self.batch_size <= self.min_replay <= self.replay_capacity,
                f"learner.min_replay={self.min_replay} must be between learner.batch_size and learner.replay_capacity")
        require(self.batch_size <= self.window_floor <= self.replay_capacity,
                f"learner.window_floor={self.window_floor} must be between learner.batch_size and "
                f"learner.replay_capacity")


@dataclass
class EvalConfig(Section):
    every_minutes: float = number(5.0, 0, 100_000, note="0 = off")
    """Minutes between evaluations on the Pons sets during training, the first at the start; 0 turns them off."""
    positions_per_set: int = number(200, 1, 1000)
    """Positions graded per set during training (the first N; `selfplay eval` grades all 1000)."""
    simulations: int = number(25, 1, 10_000)
    """MCTS simulations per graded move (alpha-zero-general's baseline uses 25)."""
    pons_dir: str = ""
    """Pons test sets; empty = $GANTRY_PONS_DIR, else the copy shipped in selfplay/data/pons."""
    arena_every_minutes: float = number(0.0, 0, 100_000, note="0 = off")
    """Minutes between arenas during training (the learner's weights against eval.arena_baselines and the run's
    earlier checkpoints, in a separate process; any game), the first after one interval; 0 = off."""
    arena_baselines: str = "random,greedy,minimax3,mcts200"
    """Baselines of the periodic arena: random, greedy, minimax<depth>, mcts<simulations> (random always plays)."""
    arena_games: int = number(40, 2, 10_000)
    """Games per pairing in the periodic arena (half with each side first); the networks search eval.simulations."""
    arena_previous: int = number(2, 0, 100)
    """Earlier checkpoints of the run the periodic arena plays (at most run.keep_checkpoints are kept)."""

    def rules(self):
        bad = [n for n in self.arena_baselines.split(",") if not BASELINE.match(n.strip())]
        require(not bad and bool(self.arena_baselines.strip()),
                f"eval.arena_baselines={self.arena_baselines!r} must list some of {BASELINE_HELP}, comma-separated")


@dataclass
class DistConfig(Section):
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Collective backend: auto = nccl when CUDA works, else gloo."""
    timeout_s: float = number(300.0, 0, 86_400, low_open=True)
    """Timeout of every collective and of the rendezvous, in seconds: a lost rank ends the run, never hangs it."""


@dataclass
class RunConfig(Section):
    dir: str = "runs/local"
    """Run directory, a local folder; an existing checkpoint there is resumed. On a node it is one of the launch's
    --sync folders (the kit's gantry.yaml), which the node's agent keeps in the bucket."""
    seed: int = number(1337, 0, MAX_SEED)
    """Base seed; each rank and actor derives its own."""
    max_steps: int = number(0, 0, 10**12, note="0 = no limit")
    """Stop after this many learner steps; 0 = no limit."""
    max_minutes: float = number(0.0, 0, 1_000_000, note="0 = no limit")
    """Stop after this many minutes of this session; 0 = no limit."""
    checkpoint_every_minutes: float = number(5.0, 0, 100_000, low_open=True)
    """Minutes between checkpoints (one is always written at the end and on SIGTERM)."""
    keep_checkpoints: int = number(3, 2, 1000)
    """Newest checkpoints kept (>= 2: the newest may be mid-write when a machine dies)."""
    log_every_seconds: float = number(10.0, 0, 86_400, low_open=True)
    """Seconds between progress lines and stats.jsonl records."""
    device: Literal["auto", "cpu", "cuda", "xla"] = "auto"
    """Learner device: auto = cuda when usable, else xla when PJRT_DEVICE is set (the TPU image sets it; torch_xla
    must then be installed), else cpu. xla = torch_xla's device (a TPU, or its CPU device under PJRT_DEVICE=CPU);
    one rank only."""

    def rules(self):
        require(bool(self.dir), "run.dir is empty: give a directory such as runs/my-run")
        require("://" not in self.dir, f"run.dir {self.dir} is a URL; the trainer writes a local folder (a node's "
                "agent copies it to the bucket, `make fetch` brings it home): give a folder such as runs/my-run")

    def time_progress(self, elapsed_s: float) -> float:
        """Share of this session's time budget spent after ``elapsed_s`` (0 without one)."""
        return min(1.0, elapsed_s / (60 * self.max_minutes)) if self.max_minutes else 0.0

    def rank_seed(self, rank: int) -> int:
        """A rank's seed: its learner's, replay's and actors' seeds and its arena's derive from it."""
        return self.seed + 1000 * rank

    def spent_by(self, step: int, elapsed_s: float) -> str:
        """What ends this session now, the end record's reason: "max_steps", "max_minutes", or "" while both last."""
        if self.max_steps and step >= self.max_steps:
            return "max_steps"
        if self.max_minutes and elapsed_s >= 60 * self.max_minutes:
            return "max_minutes"
        return ""

    def clock(self, step: int, elapsed_s: float, steps_per_s: float) -> dict:
        """The progress record's minutes so far and, with a budget, the minutes left: by max_minutes, or by max_steps
        at the last window's step rate, whichever ends the run first (None while a steps-only run has no rate)."""
        left = []
        if self.max_minutes:
            left.append(self.max_minutes - elapsed_s / 60)
        if self.max_steps and steps_per_s > 0:
            left.append(max(0, self.max_steps - step) / steps_per_s / 60)
        return {ELAPSED_MINUTES_KEY: elapsed_s / 60, REMAINING_MINUTES_KEY: max(0.0, min(left)) if left else None}

    def budget_progress(self, step: int, time_progress: float) -> float | None:
        """How far the run is through its budget, by minutes or steps, whichever ends it first; None without one.
        The learning rate's schedule follows it."""
        if not (self.max_minutes or self.max_steps):
            return None
        by_steps = min(1.0, step / self.max_steps) if self.max_steps else 0.0
        return max(time_progress, by_steps)


@dataclass
class Config:
    game: GameConfig = field(default_factory=GameConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    actors: ActorsConfig = field(default_factory=ActorsConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    # fields that change the network or the game: a checkpoint cannot be resumed under other values
    SHAPE_FIELDS: typing.ClassVar[tuple[str, ...]] = ("game.name", "model.channels", "model.blocks",
                                                      "model.policy_filters", "model.value_filters")
    # what a checkpoint written before a shape field existed was built with (its saved config lacks the key)
    LEGACY_SHAPE: typing.ClassVar[dict[str, dict]] = {"model": {"policy_filters": 2, "value_filters": 1}}


# keys of earlier versions: a user's YAML or override naming one is told what replaced it; a checkpoint's
# saved config (from_dict) may still hold them and loads with them ignored
RETIRED_KEYS: dict[str, str] = {
    "learner.max_reuse": "learner.samples_per_position (samples trained per new position; the learner "
                         "samples a growing window instead of capping each position's uses)",
    "search.random_opening_final_share": "search.random_opening_fraction, constant (a fraction falling from 0.75 "
                                         "to 0.25 over the run learned no more than 0.5 constant on the same CPU: "
                                         "bench/RESULTS.md, 2026-12-05)",
}


# section name -> its dataclass (game -> GameConfig, ...)
SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(Config)}  # type: ignore[misc]
SECTION_NAMES: dict[type, str] = {cls: name for name, cls in SECTIONS.items()}  # GameConfig -> game, ...
