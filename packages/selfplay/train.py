"""AlphaZero-style training: actors play, the learner learns, rank 0 writes.

    make train-local                                   # Connect Four on this machine
    python -m selfplay train --config connect4 --run.dir=runs/c4 --run.max_minutes=30
    python -m selfplay launch --config connect4        # under torchrun; NNODES/NODE_RANK/MASTER_ADDR from env

A run directory that already holds a checkpoint is resumed (same step, weights, optimizer
and replay buffer): run the same command again after Ctrl-C, SIGTERM or a crash.
"""

from __future__ import annotations

import dataclasses
import signal
import time

import torch

from . import checkpoint
from .config import Config
from .config_io import dump
from .distributed import (
    DistInfo,
    LostRankError,
    PeerStoppedError,
    agree,
    broadcast_state,
    close,
    first_words,
    init_distributed,
    is_collective_failure,
    start_again,
)
from .errors import LOST_CONTACT, RunError, SelfplayError
from .games import make_game
from .hardware import (
    actor_count,
    cores_per_rank,
    leaves_served_by_learner,
    pick_device,
    pick_precision,
)
from .inference import actor_dtype, actor_numbers, pick_runtime
from .learner import Learner
from .metrics import MetricsWindow
from .periodic import PeriodicArena, PeriodicEval
from .record_keys import ACTOR_NET_KEY, END_KIND, LEARNER_STEPS_PER_S_KEY
from .replay import ReplayBuffer
from .rundir import RunDir
from .self_play import Counters, SelfPlay
from .stats import RunLog, progress_line


class StopRequested:
    """SIGTERM (Spot preemption, docker stop) and Ctrl-C set a flag; the loop checkpoints and exits 0."""

    def __init__(self):
        self.reason = ""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame):
        self.reason = signal.Signals(signum).name

    def __bool__(self):
        return bool(self.reason)


def train(cfg: Config) -> int:
    """Run until max_steps / max_minutes / a signal; return the last learner step."""
    stop = StopRequested()
    info = init_distributed(cfg.dist.backend, cfg.dist.timeout_s)
    try:
        device = pick_device(cfg.run.device)  # refused before a new run's folder and stats.jsonl exist
        run_dir = RunDir(cfg.run.dir)
        if info.is_main:
            run_dir.prepare()  # writable here, and held
        runlog = RunLog(run_dir.local, enabled=info.is_main)
        try:
            return TrainingSession(cfg, info, runlog, run_dir, device).run(stop)
        except RuntimeError as error:  # a peer gone before the loop (which says its own line): one line too
            if isinstance(error, SelfplayError) or not (info.enabled and is_collective_failure(error)):
                raise
            raise LostRankError(f"rank {info.rank} {LOST_CONTACT} while the run started "
                                f"({first_words(str(error))}): another rank failed first and its error says why; "
                                f"fix that, then {start_again(info.nodes)[0]}") from None
        finally:
            runlog.close()
    finally:
        close(info)


class TrainingSession:
    """One session of a run, top to bottom: set up from a fresh start or the newest checkpoint (__init__), then
    turn the loop (advance: gather self-play, agree with the other ranks, one learner step; tend: gradings, the
    progress record, checkpoints) until the budget, a signal or a lost rank ends it, then finish (the end record,
    the final checkpoint, the line every rank prints)."""

    def __init__(self, cfg: Config, info: DistInfo, runlog: RunLog, run_dir: RunDir, device: torch.device):
        self.cfg, self.info, self.runlog, self.run_dir, self.device = cfg, info, runlog, run_dir, device
        game = make_game(cfg.game.name)
        if device.type == "xla" and info.enabled:
            raise RunError(f"run.device=xla trains on one XLA device with one rank, and this is rank {info.rank} "
                           f"of {info.world_size}: run one node with NPROC_PER_NODE=1 (a TPU VM's host cores run the "
                           f"actors)")
        precision = pick_precision(device, cfg.learner.precision)
        self.actor_net = actor_net(cfg, device)  # refused here, in one line, not in each actor
        cores = cores_per_rank()
        actors, clamped = actor_count(cfg.actors.count, cores)
        if clamped:
            runlog.say(f"warning: {clamped}")
        if device.type == "cpu":  # the learner gets the cores the actors leave
            torch.set_num_threads(max(1, cores - actors))
        self.seed = cfg.run.rank_seed(info.rank)
        torch.manual_seed(self.seed)
        self.learner = Learner(cfg, game, precision, info, self.seed)
        lc = cfg.learner
        self.replay = ReplayBuffer(lc.replay_capacity, game.state_words, game.num_actions, lc.samples_per_position,
                                   lc.window_floor, lc.window_scale, lc.window_exponent, self.seed)
        self.counters = Counters()
        self.step, self.saved_step = self._resume()
        runlog.hparams(dump(cfg))
        runlog.say(f"training {game.name}: {actors} actor(s) x {cfg.actors.games} games, "
                   f"{cfg.search.simulations} sims/move, net {cfg.model.channels}x{cfg.model.blocks}, "
                   f"actors {self.actor_net}, learner {precision.describe()}"
                   # the kernels torch picked (AVX512, AVX2, ...): ATEN_CPU_CAPABILITY can hold them lower
                   + (f" (cpu kernels {torch.backends.cpu.get_cpu_capability()})" if device.type == "cpu" else "")
                   + (f", rank {info.rank}/{info.world_size} ({info.backend})" if info.enabled else "")
                   + f", run dir {cfg.run.dir}")
        self.selfplay = SelfPlay(cfg, game, device, precision, self.learner, self.step, actors, self.seed, runlog)
        self.evals = PeriodicEval(cfg, game, info.is_main, runlog)
        self.ladder = PeriodicArena(cfg, run_dir.local, info.is_main, self.seed, runlog)
        self.started = self.last_log = self.last_ckpt = time.monotonic()
        self.window = MetricsWindow(self.counters)
        self.ready_step = self.stopping = self.warned_dead_value = False
        self.end_reason = ""  # the budget's, once the ranks agree it is spent: "max_steps" or "max_minutes"

    def run(self, stop: StopRequested) -> int:
        """Train until the ranks agree to stop; return the last learner step."""
        lost: RuntimeError | None = None
        try:
            self.selfplay.pool.start()
            while self.advance(stop):
                self.tend(time.monotonic())
            # the last, partial window: a run shorter than one log interval still says what it played, and games or
            # steps that came after the last line are recorded however soon the run ended (bench reads its games)
            if (self.window.steps or self.counters.games != self.window.games_at.games
                    or time.monotonic() - self.last_log > 0.05):
                self.log_window(max(1e-3, time.monotonic() - self.last_log))
            if stop or (self.stopping and not self.end_reason):
                self.runlog.say(f"{stop.reason or 'another rank was signalled'}: stopping actors and writing a final "
                                "checkpoint")
        except RuntimeError as error:
            if not (self.info.enabled and is_collective_failure(error)):
                raise
            lost = error
        finally:
            self.selfplay.stop()  # actors first: a SIGTERM's ~25 s belong to the checkpoint
            self.evals.close()
            self.ladder.close()
        return self.finish(stop, lost)

    def advance(self, stop: StopRequested) -> bool:
        """Gather self-play output (waiting briefly only when the learner cannot step anyway), agree with the other
        ranks, and take one learner step if every rank has a batch; False once the ranks agree to stop."""
        cfg, lc = self.cfg, self.cfg.learner
        wait_from = time.monotonic()
        self.selfplay.collect(self.replay, self.counters, timeout=0 if self.ready_step else 0.25)
        has_batch = self.replay.size >= lc.min_replay and self.replay.ready(lc.batch_size)
        elapsed = time.monotonic() - self.started
        spent_by = cfg.run.spent_by(self.step, elapsed)
        self.ready_step, self.stopping, progress, self.saved_step, out_of_time = agree(
            has_batch, bool(stop), self.info, self.device, cfg.run.time_progress(elapsed), self.saved_step,
            bool(spent_by))
        if out_of_time:  # another rank's clock, when not this one's: the ranks share the step, so its minutes
            self.end_reason = spent_by or "max_minutes"
        if self.stopping:
            return False
        if not self.ready_step:
            self.window.waited(time.monotonic() - wait_from, filling=self.replay.size < lc.min_replay)
            return True
        self.learner.set_progress(cfg.run.budget_progress(self.step, progress), self.step)
        batch = self.replay.sample(lc.batch_size)
        self.window.stepped(self.learner.step(batch), float(self.step - batch["version"].mean()))
        self.step += 1
        if self.step % lc.publish_every == 0:
            self.selfplay.publish(self.learner.model, self.step)
        return True

    def tend(self, now: float) -> None:
        """What runs on the clock beside the steps: gradings in the background, the progress record, checkpoints."""
        self.evals.poll(self.step, self.learner.playing_model(), now)
        self.ladder.poll(self.step, self.learner.playing_model(), now)
        if now - self.last_log >= self.cfg.run.log_every_seconds:
            self.log_window(now - self.last_log)
            self.last_log = now
        if now - self.last_ckpt >= 60 * self.cfg.run.checkpoint_every_minutes:
            self.save()
            self.last_ckpt = now

    def log_window(self, seconds: float) -> None:
        """One progress record and line: the window's rates, losses and waits, and the clock against the budget."""
        learner, step = self.learner, self.step
        metrics = self.window.metrics(self.selfplay.pool, self.replay, self.counters, step, seconds)
        metrics["learner/lr"] = learner.optimizer.param_groups[0]["lr"]
        metrics[ACTOR_NET_KEY] = self.actor_net
        metrics["learner/value_units_firing"] = firing = learner.value_units_firing()
        metrics.update(self.cfg.run.clock(step, time.monotonic() - self.started, metrics[LEARNER_STEPS_PER_S_KEY]))
        self.runlog.record(step, metrics)
        self.runlog.say(progress_line(metrics, self.evals.last))
        if firing == 0 and step > self.cfg.learner.warmup_steps and not self.warned_dead_value:
            self.warned_dead_value = True
            self.runlog.say("warning: no unit of the value head's hidden layer fires on the last batch, so the value "
                            "is the same for every position and search runs on the policy alone; start a new run "
                            "(another --run.dir) with a longer --learner.warmup_steps or a lower --learner.lr")

    def save(self, final: bool = False) -> None:
        """Rank 0 writes a checkpoint of the whole session: weights, optimizer, counters and the replay buffer."""
        if not self.info.is_main:
            return
        state = checkpoint.Checkpoint(step=self.step, config=self.cfg.to_dict(),
                                      counters=dataclasses.asdict(self.counters), replay=self.replay.state_dict(),
                                      **self.learner.state_dict())
        path = checkpoint.save(self.run_dir.local, state, keep=self.cfg.run.keep_checkpoints)
        self.saved_step = self.step
        self.runlog.say(f"checkpoint {path}" + (" (final)" if final else ""))

    def finish(self, stop: StopRequested, lost: RuntimeError | None) -> int:
        """The end record (when the budget ended the session), the final checkpoint, and the line every rank prints;
        a lost rank or a stop another rank's signal caused is an error, so the node's agent starts the run again."""
        info, step = self.info, self.step
        if self.end_reason and lost is None:  # before the final save
            self.runlog.record(step, {"reason": self.end_reason}, kind=END_KIND)
        # reached on a clean stop and on a lost rank: the state is consistent at `step`, because a failed
        # all-reduce never reaches the optimizer
        self.save(final=True)
        if lost is not None:
            raise LostRankError(lost_rank_line(info, step, str(lost), self.saved_step))
        # every rank prints this: identical lines across ranks prove DDP kept them in step
        checksum = sum(float(p.detach().cpu().double().sum()) for p in self.learner.model.parameters())  # TPUs: no f64
        played = self.selfplay.pool.totals()["moves"]
        print(f"rank {info.rank} finished at step {step}, weights checksum {checksum:.6f}, "
              f"{played:.0f} positions played here in {time.monotonic() - self.started:.1f} s", flush=True)
        peer_stopped = self.stopping and not stop and not self.end_reason
        signalled_soon = time.monotonic() + 2  # `make stop` signals every node within moments: then this one is done
        while peer_stopped and not stop and time.monotonic() < signalled_soon:
            time.sleep(0.05)
        if peer_stopped and not stop:
            # another rank's node was signalled (a Spot preemption, a shutdown) and the group stopped with it: this
            # node's run is not done, and exit 0 would tell its agent it is (gantry_agent.decide records an end, and
            # no verb starts the run again); a failure is started again and resumes from this checkpoint once every
            # node is back
            raise PeerStoppedError(f"rank {info.rank} stopped at step {step} because another rank was signalled (its "
                                   "node shut down or was preempted); the checkpoint is written, and starting this "
                                   "node's command again resumes the run once every node is back (a node agent "
                                   "does that)")
        return step

    def _resume(self) -> tuple[int, int | None]:
        """Rank 0 reads the newest checkpoint, then every rank starts from its weights and step; return the step and
        the step of the checkpoint it came from (None for a fresh run), which every rank learns."""
        info, learner = self.info, self.learner
        step, saved_step = 0, None
        newest = checkpoint.latest(self.run_dir.local) if info.is_main else None
        if newest is not None:
            saved = checkpoint.load(newest)
            checkpoint.check_resumes(saved, self.cfg, newest)
            learner.load_state_dict(saved.learner_state())
            if saved.replay:
                self.replay.load_state_dict(saved.replay)
            self.counters = Counters.from_checkpoint(saved.counters)
            step = saved_step = saved.step
            self.runlog.say(f"resumed from {newest} at step {step} ({self.replay.size} positions in the buffer)")
        if info.enabled:  # every rank starts from rank 0's step, weights and optimizer state, fresh or resumed
            state = broadcast_state({**learner.state_dict(), "step": step, "saved_step": saved_step}
                                    if info.is_main else None, info)
            if not info.is_main:
                learner.load_state_dict(state)
                step, saved_step = int(state["step"]), state["saved_step"]
        return step, saved_step


def actor_net(cfg: Config, device: torch.device) -> str:
    """What runs the actors' net and in what numbers, as the first line and every progress record name it; an
    actors.runtime this machine cannot run is refused here, in one line, not in each actor."""
    numbers = actor_numbers(cfg.actors.precision, cfg.actors.runtime)
    runtime = pick_runtime(cfg.actors.runtime, actor_dtype(cfg.actors.precision, cfg.actors.runtime),
                           int8=numbers == "int8")
    # served leaves run the learner's numbers, whatever actors.precision says (self_play.SelfPlay)
    if leaves_served_by_learner(cfg.actors.inference, device, numbers):
        return f"leaves on the learner's {device}"
    return f"{runtime}/{numbers}"


def lost_rank_line(info: DistInfo, step: int, error: str, saved_step: int | None) -> str:
    """What a rank that lost another says. Only rank 0 writes checkpoints: another rank names the newest one
    rank 0 reported in the last agree(), or says there is none, and never claims one of its own."""
    again, doing_it = start_again(info.nodes)
    if saved_step is None:
        resumes = f"rank 0 reported no checkpoint, so {doing_it} starts the run over from step 0"
    else:
        resumes = (f"the run resumes from step {saved_step} ({checkpoint.checkpoint_path('', saved_step).name}, "
                   + ("written now" if info.is_main else "the newest checkpoint rank 0 reported")
                   + f"); {again} to resume")
    return f"rank {info.rank} {LOST_CONTACT} at step {step} ({first_words(error)}): {resumes}"
