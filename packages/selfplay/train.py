"""AlphaZero-style training: actors play, the learner learns, rank 0 writes.

    make train-local                                   # Connect Four on this machine
    python -m selfplay train --config connect4 --run.dir=runs/c4 --run.max_minutes=30
    python -m selfplay launch --config connect4        # under torchrun; NNODES/NODE_RANK/MASTER_ADDR from env

A run directory that already holds a checkpoint is resumed (same step, weights, optimizer
and replay buffer): run the same command again after Ctrl-C, SIGTERM or a crash.
"""

from __future__ import annotations

import signal
import time

import torch

from . import checkpoint
from .arena import PeriodicArena
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
from .metrics import MetricsWindow, budget_clock
from .periodic_eval import PeriodicEval
from .record_keys import END_KIND
from .replay import ReplayBuffer
from .rundir import RunDir
from .self_play import SelfPlay
from .stats import ACTOR_NET_KEY, RunLog, progress_line


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
            return _run(cfg, info, runlog, stop, run_dir, device)
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


def _run(cfg: Config, info: DistInfo, runlog: RunLog, stop: StopRequested, run_dir: RunDir,
         device: torch.device) -> int:
    game = make_game(cfg.game.name)
    if device.type == "xla" and info.enabled:
        raise RunError(f"run.device=xla trains on one XLA device with one rank, and this is rank {info.rank} of "
                           f"{info.world_size}: run one node with NPROC_PER_NODE=1 (a TPU VM's host cores run the "
                           f"actors)")
    precision = pick_precision(device, cfg.learner.precision)
    numbers = actor_numbers(cfg.actors.precision, cfg.actors.runtime)
    # refused here, in one line, not in each actor
    actor_runtime = pick_runtime(cfg.actors.runtime, actor_dtype(cfg.actors.precision, cfg.actors.runtime),
                                 int8=numbers == "int8")
    # served leaves run the learner's numbers, whatever actors.precision says (self_play.SelfPlay)
    actor_net = (f"leaves on the learner's {device}"
                 if leaves_served_by_learner(cfg.actors.inference, device, numbers) else f"{actor_runtime}/{numbers}")
    cores = cores_per_rank()
    actors, clamped = actor_count(cfg.actors.count, cores)
    if clamped:
        runlog.say(f"warning: {clamped}")
    if device.type == "cpu":  # the learner gets the cores the actors leave
        torch.set_num_threads(max(1, cores - actors))
    seed = cfg.run.seed + 1000 * info.rank
    torch.manual_seed(seed)
    learner = Learner(cfg, game, precision, info, seed)
    lc = cfg.learner
    replay = ReplayBuffer(lc.replay_capacity, game.state_words, game.num_actions, lc.samples_per_position,
                          lc.window_floor, lc.window_scale, lc.window_exponent, seed)
    counters = {"games": 0, "positions": 0, "plies": 0, "draws": 0, "actor_restarts": 0}
    step, saved_step = _resume(cfg, info, runlog, run_dir, learner, replay, counters)
    runlog.hparams(dump(cfg))
    runlog.say(f"training {game.name}: {actors} actor(s) x {cfg.actors.games} games, "
               f"{cfg.search.simulations} sims/move, net {cfg.model.channels}x{cfg.model.blocks}, "
               f"actors {actor_net}, learner {precision.describe()}"
               # the kernels torch picked (AVX512, AVX2, ...): ATEN_CPU_CAPABILITY can hold them lower
               + (f" (cpu kernels {torch.backends.cpu.get_cpu_capability()})" if device.type == "cpu" else "")
               + (f", rank {info.rank}/{info.world_size} ({info.backend})" if info.enabled else "")
               + f", run dir {cfg.run.dir}")
    selfplay = SelfPlay(cfg, game, device, precision, learner, step, actors, seed, runlog)
    evals = PeriodicEval(cfg, game, info, runlog)
    ladder = PeriodicArena(cfg, run_dir.local, info.is_main, runlog)  # eval.arena_every_minutes, off by default

    def save(final: bool = False) -> None:
        nonlocal saved_step
        if not info.is_main:
            return
        state = checkpoint.Checkpoint(step=step, config=cfg.to_dict(), counters=counters, replay=replay.state_dict(),
                                      **learner.state_dict())
        path = checkpoint.save(run_dir.local, state, keep=cfg.run.keep_checkpoints)
        saved_step = step
        runlog.say(f"checkpoint {path}" + (" (final)" if final else ""))

    warned_dead_value = False

    def log_window(seconds: float) -> None:
        nonlocal warned_dead_value
        metrics = window.metrics(selfplay.pool, replay, counters, step, seconds)
        metrics["learner/lr"] = learner.optimizer.param_groups[0]["lr"]
        metrics[ACTOR_NET_KEY] = actor_net
        metrics["learner/value_units_firing"] = firing = learner.value_units_firing()
        metrics.update(budget_clock(cfg, step, time.monotonic() - started, metrics["charts/learner_steps_per_s"]))
        runlog.record(step, metrics)
        runlog.say(progress_line(metrics, evals.last))
        if firing == 0 and step > lc.warmup_steps and not warned_dead_value:
            warned_dead_value = True
            runlog.say("warning: no unit of the value head's hidden layer fires on the last batch, so the value is "
                       "the same for every position and search runs on the policy alone; start a new run (another "
                       "--run.dir) with a longer --learner.warmup_steps or a lower --learner.lr")

    started = time.monotonic()
    last_log = last_ckpt = started
    window = MetricsWindow(counters)
    ready_step = False
    lost: RuntimeError | None = None
    out_of_time = stopping = False
    try:
        selfplay.pool.start()
        while True:
            # -- gather self-play output; wait briefly only when the learner cannot step anyway
            wait_from = time.monotonic()
            selfplay.collect(replay, counters, timeout=0 if ready_step else 0.25)
            has_batch = replay.size >= lc.min_replay and replay.ready(lc.batch_size)
            elapsed = time.monotonic() - started
            out_of_time = (cfg.run.max_steps and step >= cfg.run.max_steps) or \
                          (cfg.run.max_minutes and elapsed >= 60 * cfg.run.max_minutes)
            ready_step, stopping, progress, saved_step, out_of_time = agree(
                has_batch, bool(stop), info, device, cfg.run.time_progress(elapsed), saved_step, bool(out_of_time))
            if stopping:
                break
            if not ready_step:
                window.waited(time.monotonic() - wait_from, filling=replay.size < lc.min_replay)
            else:
                learner.set_progress(cfg.run.budget_progress(step, progress), step)
                batch = replay.sample(lc.batch_size)
                window.stepped(learner.step(batch), float(step - batch["version"].mean()))
                step += 1
                if step % lc.publish_every == 0:
                    selfplay.publish(learner.model, step)

            now = time.monotonic()
            evals.poll(step, learner.playing_model(), now)
            ladder.poll(step, learner.playing_model(), now)
            if now - last_log >= cfg.run.log_every_seconds:
                log_window(now - last_log)
                last_log = now
            if now - last_ckpt >= 60 * cfg.run.checkpoint_every_minutes:
                save()
                last_ckpt = now
        # the last, partial window: a run shorter than one log interval still says what it played, and games or
        # steps that came after the last line are recorded however soon the run ended (bench reads its games)
        if window.steps or counters["games"] != window.games_at["games"] or time.monotonic() - last_log > 0.05:
            log_window(max(1e-3, time.monotonic() - last_log))
        if stop or (stopping and not out_of_time):
            runlog.say(f"{stop.reason or 'another rank was signalled'}: stopping actors and writing a final checkpoint")
    except RuntimeError as error:
        if not (info.enabled and is_collective_failure(error)):
            raise
        lost = error
    finally:
        selfplay.stop()  # actors first: a SIGTERM's ~25 s belong to the checkpoint
        evals.close()
        ladder.close()
    if out_of_time and lost is None:  # before the final save, which carries stats.jsonl to the bucket
        runlog.record(step, {"reason": "max_steps" if cfg.run.max_steps and step >= cfg.run.max_steps
                             else "max_minutes"}, kind=END_KIND)
    # reached on a clean stop and on a lost rank: the state is consistent at `step`, because a failed
    # all-reduce never reaches the optimizer
    save(final=True)
    if lost is not None:
        raise LostRankError(lost_rank_line(info, step, str(lost), saved_step))
    # every rank prints this: identical lines across ranks prove DDP kept them in step
    checksum = sum(float(p.detach().cpu().double().sum()) for p in learner.model.parameters())  # TPUs have no f64
    played = selfplay.pool.totals()["moves"]
    print(f"rank {info.rank} finished at step {step}, weights checksum {checksum:.6f}, "
          f"{played:.0f} positions played here in {time.monotonic() - started:.1f} s", flush=True)
    signalled_soon = time.monotonic() + 2  # `make stop` signals every node within moments: then this one is done too
    while stopping and not stop and not out_of_time and time.monotonic() < signalled_soon:
        time.sleep(0.05)
    if stopping and not stop and not out_of_time:
        # another rank's node was signalled (a Spot preemption, a shutdown) and the group stopped with it: this node's
        # run is not done, and exit 0 would tell its agent it is (gantry_agent.decide records an end, and no verb
        # starts the run again); a failure is started again and resumes from this checkpoint once every node is back
        raise PeerStoppedError(f"rank {info.rank} stopped at step {step} because another rank was signalled (its node "
                               "shut down or was preempted); the checkpoint is written, and starting this node's "
                               "command again resumes the run once every node is back (a node agent does that)")
    return step


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


def _resume(cfg: Config, info: DistInfo, runlog: RunLog, run_dir: RunDir, learner: Learner, replay: ReplayBuffer,
            counters: dict) -> int:
    """Rank 0 reads the newest checkpoint, then every rank starts from its weights and step; return the step and
    the step of the checkpoint it came from (None for a fresh run), which every rank learns."""
    step, saved_step = 0, None
    newest = checkpoint.latest(run_dir.local) if info.is_main else None
    if newest is not None:
        saved = checkpoint.load(newest)
        checkpoint.check_resumes(saved, cfg, newest)
        learner.load_state_dict(saved.learner_state())
        if saved.replay:
            replay.load_state_dict(saved.replay)
        counters.update(saved.counters)
        step = saved_step = saved.step
        runlog.say(f"resumed from {newest} at step {step} ({replay.size} positions in the buffer)")
    if info.enabled:  # every rank starts from rank 0's step, weights and optimizer state, fresh or resumed
        state = broadcast_state({**learner.state_dict(), "step": step, "saved_step": saved_step}
                                if info.is_main else None, info)
        if not info.is_main:
            learner.load_state_dict(state)
            step, saved_step = int(state["step"]), state["saved_step"]
    return step, saved_step
