"""Self-play as the training loop sees it: the actors, the weights they read and, on the GPU path, the server
that answers their leaves from the learner's device."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .actor_pool import ActorPool
from .config import Config
from .hardware import inference_dtype, leaves_served_by_learner
from .inference import actor_numbers
from .leaf_server import LeafServer, LeafSlots
from .learner import Learner
from .replay import ReplayBuffer
from .stats import RunLog
from .weights import SharedWeights, flat_float_state


@dataclass
class Counters:
    """The session's self-play totals; every checkpoint carries them, so a resumed run goes on counting."""

    games: int = 0
    positions: int = 0  # recorded for training
    plies: int = 0  # played
    draws: int = 0
    actor_restarts: int = 0

    @classmethod
    def from_checkpoint(cls, saved: dict) -> Counters:
        """A checkpoint's counters (a dict: checkpoints hold no classes); names it does not know are dropped."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: int(v) for k, v in saved.items() if k in names})


class SelfPlay:
    """The actors, the weights they read and, on the GPU path, the server that answers their leaves."""

    def __init__(self, cfg: Config, game, device: torch.device, precision, learner: Learner, step: int,
                 actors: int, seed: int, runlog: RunLog):
        self.runlog = runlog
        numel = sum(v.numel() for _, v in flat_float_state(learner.model))
        self.weights = SharedWeights(numel)
        self.weights.publish(learner.model, step)
        self.server = None
        accelerator = device.type in ("cuda", "xla")
        numbers = actor_numbers(cfg.actors.precision, cfg.actors.runtime)
        if leaves_served_by_learner(cfg.actors.inference, device, numbers):
            planes = game.encode(game.initial_states(1)).shape[1:]
            dtype = precision.dtype if accelerator else inference_dtype(cfg.actors.precision)
            self.server = LeafServer(LeafSlots(actors, cfg.actors.games, planes, game.num_actions), device, dtype,
                                     learner.device_lock if device.type == "xla" else None)
            self.server.publish(learner.model, step)
            self.server.start()
            runlog.say(f"self-play leaves are evaluated on the learner's {device} for all {actors} actor(s)")
        elif accelerator:
            why = (f"the actors search in {numbers}; actors.inference=learner serves them anyway"
                   if cfg.actors.inference == "auto" else "actors.inference=local")
            runlog.say(f"self-play leaves are evaluated on each actor's own core, not the learner's {device} ({why})")
        self.pool = ActorPool(actors, cfg.to_dict(), self.weights.name, numel, seed, cfg.actors.restart_limit,
                              self.server)

    def collect(self, replay: ReplayBuffer, counters: Counters, timeout: float) -> None:
        """Finished games into the replay buffer; restarted actors counted and reported."""
        for event in self.pool.check():
            counters.actor_restarts += 1
            self.runlog.say(f"warning: {event}")
        for s in self.pool.get(timeout=timeout):
            replay.add(s.states, s.policy, s.z, s.q, s.version)
            counters.games += s.games
            counters.positions += len(s.z)
            counters.plies += s.plies
            counters.draws += s.outcomes["draw"]

    def publish(self, model, step: int) -> None:
        (self.server or self.weights).publish(model, step)

    def stop(self) -> None:
        self.pool.stop()
        if self.server is not None:  # after the actors: one waiting on its answer would otherwise hang until killed
            self.server.stop()
            self.server.slots.close()
        self.weights.close()
