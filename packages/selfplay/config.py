"""Trainer configuration: one dataclass per concern (config_io.py reads and writes them: YAML on disk,
``--section.key=value`` overrides, the dict a checkpoint saves).

Every field carries its default and a docstring; ``__post_init__`` rejects bad values
with a message naming the field and the allowed range. The resolved config is saved in
every checkpoint, and a resumed run must match it on the fields that shape the model.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from typing import Literal

from .errors import ConfigError
from .games import GAMES

# Arena baselines by name: the config validates eval.arena_baselines with it, players.py builds them from it.
BASELINE = re.compile(r"^(random|greedy|minimax(\d+)|mcts(\d+))$")
BASELINE_HELP = "random, greedy, minimax<depth> (e.g. minimax5), mcts<simulations> (e.g. mcts1000)"


def require(ok: bool, message: str) -> None:
    """ConfigError(message) unless ``ok``."""
    if not ok:
        raise ConfigError(message)


@dataclass
class GameConfig:
    name: str = "connect4"
    """Which game: connect4 | tictactoe."""

    def __post_init__(self):
        require(self.name in GAMES, f"game.name={self.name!r} is unknown: choose one of {', '.join(sorted(GAMES))}")


@dataclass
class ModelConfig:
    channels: int = 32
    """Width of the residual trunk (filters per conv)."""
    blocks: int = 4
    """Residual blocks in the trunk."""
    policy_filters: int = 32
    """1x1 filters of the policy head (AlphaZero.jl uses 32; 2 squeezed the trunk's features through a slit)."""
    value_filters: int = 32
    """1x1 filters of the value head (AlphaZero.jl uses 32; 1 left the value a single feature map)."""

    def __post_init__(self):
        require(1 <= self.channels <= 1024, f"model.channels={self.channels} must be in 1..1024")
        require(0 <= self.blocks <= 64, f"model.blocks={self.blocks} must be in 0..64")
        require(1 <= self.policy_filters <= 1024, f"model.policy_filters={self.policy_filters} must be in 1..1024")
        require(1 <= self.value_filters <= 1024, f"model.value_filters={self.value_filters} must be in 1..1024")


@dataclass
class SearchConfig:
    simulations: int = 64
    """MCTS simulations per self-play move."""
    c_puct: float = 1.5
    """Exploration constant of PUCT."""
    dirichlet_alpha: float = 1.0
    """Root noise concentration (about 10 / typical number of legal moves)."""
    noise_fraction: float = 0.25
    """Share of the root prior replaced by Dirichlet noise in self-play (never in evaluation)."""
    temperature_moves: int = 12
    """Moves played in proportion to visit counts at the start of each game; after that, the most visited."""
    full_search_fraction: float = 1.0
    """Playout-cap randomisation (KataGo): this share of self-play moves get `simulations` with root noise and
    become training positions; the rest get `fast_simulations` without noise and are only played. 1 = off."""
    fast_simulations: int = 16
    """Simulations of the fast, unrecorded searches (search.full_search_fraction < 1); at most search.simulations."""
    random_opening_fraction: float = 0.0
    """Share of self-play games that open with 1..random_opening_moves uniformly random moves, played but not
    recorded: lopsided early positions that self-play between equals never reaches (the Pons sets' are random)."""
    random_opening_moves: int = 12
    """Most random moves a random opening plays (search.random_opening_fraction > 0)."""

    def __post_init__(self):
        require(1 <= self.simulations <= 100_000, f"search.simulations={self.simulations} must be in 1..100000")
        require(self.c_puct > 0, f"search.c_puct={self.c_puct} must be > 0")
        require(self.dirichlet_alpha > 0, f"search.dirichlet_alpha={self.dirichlet_alpha} must be > 0")
        require(0 <= self.noise_fraction < 1, f"search.noise_fraction={self.noise_fraction} must be in [0, 1)")
        require(self.temperature_moves >= 0, f"search.temperature_moves={self.temperature_moves} must be >= 0")
        require(0 < self.full_search_fraction <= 1,
               f"search.full_search_fraction={self.full_search_fraction} must be in (0, 1] (1 = every move in full)")
        require(1 <= self.fast_simulations <= 100_000,
               f"search.fast_simulations={self.fast_simulations} must be in 1..100000")
        require(0 <= self.random_opening_fraction <= 1,
               f"search.random_opening_fraction={self.random_opening_fraction} must be in [0, 1] (0 = off)")
        require(1 <= self.random_opening_moves <= 1000,
               f"search.random_opening_moves={self.random_opening_moves} must be in 1..1000")


@dataclass
class ActorsConfig:
    count: int = 0
    """Self-play processes; 0 = physical cores - 1, or one per core on 1-2 cores (cgroup and SMT aware)."""
    games: int = 128
    """Games each actor plays in lock-step (the network's batch size in self-play)."""
    restart_limit: int = 10
    """Crashed actors are restarted up to this many times in total before the run stops."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """Self-play inference on a CPU: auto = bf16 where it has bf16 instructions (AVX512-BF16, AMX), else fp32."""
    runtime: Literal["auto", "torch", "onnxruntime"] = "auto"
    """What runs an actor's forward pass on its core: auto = ONNX Runtime where self-play is fp32 (CPUs without
    bf16; 1.65x eager torch on an AVX2 EPYC), torch where it is bf16 or onnxruntime does not import."""
    inference: Literal["auto", "local", "learner"] = "auto"
    """Who runs the network for the search: local = each actor on its own core; learner = the learner's device
    answers every actor's leaves in one batch (leaf_server.py); auto = learner when it is on a GPU or XLA and the
    actors would search in fp32 (a CPU without bf16), else local (hardware.leaves_served_by_learner)."""

    def __post_init__(self):
        require(0 <= self.count <= 1024, f"actors.count={self.count} must be in 0..1024 (0 = automatic)")
        require(1 <= self.games <= 65536, f"actors.games={self.games} must be in 1..65536")
        require(self.restart_limit >= 0, f"actors.restart_limit={self.restart_limit} must be >= 0")


@dataclass
class LearnerConfig:
    batch_size: int = 256
    """Positions per gradient step."""
    lr: float = 2e-3
    """AdamW learning rate."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    warmup_steps: int = 300
    """Steps over which the learning rate ramps up linearly from lr / warmup_steps (0 = none). Without it Adam's
    first full-rate steps silence most of the value head's hidden ReLUs for good (learner.warmup_factor)."""
    replay_capacity: int = 200_000
    """Positions kept in the replay ring buffer (oldest overwritten first)."""
    min_replay: int = 2_000
    """Positions needed before the first step."""
    samples_per_position: float = 4.0
    """Samples trained per position self-play adds: the learner waits when it is further ahead (replay.py)."""
    window_floor: int = 20_000
    """Batches are drawn from at least the newest this many positions (all of them while fewer are held)."""
    window_scale: float = 4.0
    """Above the floor the sampling window is window_scale * positions_added ** window_exponent (KataGo)."""
    window_exponent: float = 0.75
    """How fast the window grows with the data: 1 = linearly (all of it), smaller = older games fade out."""
    lr_schedule: Literal["constant", "cosine"] = "cosine"
    """cosine: decay learner.lr to lr_final_fraction of it over run.max_minutes (or run.max_steps);
    constant when the run has neither budget. The schedule follows this session's budget."""
    lr_final_fraction: float = 0.1
    """Learning rate at the end of the budget, as a fraction of learner.lr (cosine schedule)."""
    ema_half_life_steps: int = 100
    """Half-life, in learner steps, of the moving average of the weights that is graded, played in the arena and
    saved beside the raw weights (Checkpoint.playing_weights); 0 = none, the raw weights play."""
    value_target: Literal["z", "q", "zq"] = "zq"
    """z = game result, q = search value, zq = their mean (z + q) / 2."""
    publish_every: int = 20
    """Steps between publishing weights to the actors."""
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    """auto: bf16 on CPUs with AMX or AVX512-BF16, fp32 on other CPUs; on CUDA bf16 at capability >= 8, else fp16;
    bf16 on XLA."""

    def __post_init__(self):
        require(1 <= self.batch_size <= 65536, f"learner.batch_size={self.batch_size} must be in 1..65536")
        require(0 < self.lr < 1, f"learner.lr={self.lr} must be in (0, 1)")
        require(self.weight_decay >= 0, f"learner.weight_decay={self.weight_decay} must be >= 0")
        require(0 <= self.warmup_steps <= 1_000_000, f"learner.warmup_steps={self.warmup_steps} must be in 0..1000000")
        require(self.replay_capacity >= self.batch_size,
               f"learner.replay_capacity={self.replay_capacity} must be >= learner.batch_size={self.batch_size}")
        require(self.batch_size <= self.min_replay <= self.replay_capacity,
               f"learner.min_replay={self.min_replay} must be between learner.batch_size and learner.replay_capacity")
        require(0 < self.samples_per_position <= 1000,
               f"learner.samples_per_position={self.samples_per_position} must be in (0, 1000]")
        require(self.batch_size <= self.window_floor <= self.replay_capacity,
               f"learner.window_floor={self.window_floor} must be between learner.batch_size and "
               f"learner.replay_capacity")
        require(0 < self.window_scale <= 1e6, f"learner.window_scale={self.window_scale} must be in (0, 1e6]")
        require(0 < self.window_exponent <= 1, f"learner.window_exponent={self.window_exponent} must be in (0, 1]")
        require(0 < self.lr_final_fraction <= 1,
               f"learner.lr_final_fraction={self.lr_final_fraction} must be in (0, 1]")
        require(self.publish_every >= 1, f"learner.publish_every={self.publish_every} must be >= 1")
        require(0 <= self.ema_half_life_steps <= 1_000_000,
               f"learner.ema_half_life_steps={self.ema_half_life_steps} must be in 0..1000000 (0 = no average)")


@dataclass
class EvalConfig:
    every_minutes: float = 5.0
    """Minutes between evaluations on the Pons sets during training, the first at the start; 0 turns them off."""
    positions_per_set: int = 200
    """Positions graded per set during training (the first N; `selfplay eval` grades all 1000)."""
    simulations: int = 25
    """MCTS simulations per graded move (alpha-zero-general's baseline uses 25)."""
    pons_dir: str = ""
    """Pons test sets; empty = $GANTRY_PONS_DIR, else the copy shipped in selfplay/data/pons."""
    arena_every_minutes: float = 0.0
    """Minutes between arenas during training (the learner's weights against eval.arena_baselines and the run's
    earlier checkpoints, in a separate process; any game), the first after one interval; 0 = off."""
    arena_baselines: str = "random,greedy,minimax3,mcts200"
    """Baselines of the periodic arena: random, greedy, minimax<depth>, mcts<simulations> (random always plays)."""
    arena_games: int = 40
    """Games per pairing in the periodic arena (half with each side first); the networks search eval.simulations."""
    arena_previous: int = 2
    """Earlier checkpoints of the run the periodic arena plays (at most run.keep_checkpoints are kept)."""

    def __post_init__(self):
        require(self.every_minutes >= 0, f"eval.every_minutes={self.every_minutes} must be >= 0 (0 = off)")
        require(self.arena_every_minutes >= 0, f"eval.arena_every_minutes={self.arena_every_minutes} must be >= 0 "
                                              f"(0 = off)")
        bad = [n for n in self.arena_baselines.split(",") if not BASELINE.match(n.strip())]
        require(not bad and bool(self.arena_baselines.strip()),
               f"eval.arena_baselines={self.arena_baselines!r} must list some of {BASELINE_HELP}, comma-separated")
        require(2 <= self.arena_games <= 10_000, f"eval.arena_games={self.arena_games} must be in 2..10000")
        require(0 <= self.arena_previous <= 100, f"eval.arena_previous={self.arena_previous} must be in 0..100")
        require(1 <= self.positions_per_set <= 1000, f"eval.positions_per_set={self.positions_per_set} must be in 1..1000")
        require(1 <= self.simulations <= 10_000, f"eval.simulations={self.simulations} must be in 1..10000")


@dataclass
class DistConfig:
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """Collective backend: auto = nccl when CUDA works, else gloo."""
    timeout_s: float = 300.0
    """Timeout of every collective and of the rendezvous, in seconds: a lost rank ends the run, never hangs it."""

    def __post_init__(self):
        require(self.timeout_s > 0, f"dist.timeout_s={self.timeout_s} must be > 0")


@dataclass
class RunConfig:
    dir: str = "runs/local"
    """Run directory (local path or fsspec URL such as gs://bucket/prefix); an existing checkpoint there is resumed."""
    seed: int = 1337
    """Base seed; each rank and actor derives its own."""
    max_steps: int = 0
    """Stop after this many learner steps; 0 = no limit."""
    max_minutes: float = 0.0
    """Stop after this many minutes of this session; 0 = no limit."""
    checkpoint_every_minutes: float = 5.0
    """Minutes between checkpoints (one is always written at the end and on SIGTERM)."""
    keep_checkpoints: int = 3
    """Newest checkpoints kept (>= 2: the newest may be mid-write when a machine dies)."""
    log_every_seconds: float = 10.0
    """Seconds between progress lines and stats.jsonl records."""
    device: Literal["auto", "cpu", "cuda", "xla"] = "auto"
    """Learner device: auto = cuda when usable, else xla when PJRT_DEVICE is set (the TPU image sets it; torch_xla
    must then be installed), else cpu. xla = torch_xla's device (a TPU, or its CPU device under PJRT_DEVICE=CPU);
    one rank only."""

    def __post_init__(self):
        require(bool(self.dir), "run.dir is empty: give a directory such as runs/my-run")
        require(self.max_steps >= 0, f"run.max_steps={self.max_steps} must be >= 0 (0 = no limit)")
        require(self.max_minutes >= 0, f"run.max_minutes={self.max_minutes} must be >= 0 (0 = no limit)")
        require(self.checkpoint_every_minutes > 0, "run.checkpoint_every_minutes must be > 0")
        require(self.keep_checkpoints >= 2, f"run.keep_checkpoints={self.keep_checkpoints} must be >= 2")
        require(self.log_every_seconds > 0, "run.log_every_seconds must be > 0")


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
}


# section name -> its dataclass (game -> GameConfig, ...)
SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(Config)}  # type: ignore[misc]
