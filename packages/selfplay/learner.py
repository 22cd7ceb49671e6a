"""The learner: one gradient step on a replay batch, with flip augmentation, the (z + q) / 2 target,
a learning rate that decays over the run's budget and a moving average of the weights for play."""

from __future__ import annotations

import math
import threading
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from .config import Config
from .distributed import DistInfo, to_cpu
from .games import Game
from .hardware import Precision
from .model import build_model, value_units_firing, widen_input_planes
from .record_keys import LOSS_KEY, POLICY_LOSS_KEY, VALUE_LOSS_KEY


def lr_factor(progress: float, schedule: str, final_fraction: float) -> float:
    """Multiplier of the base learning rate when ``progress`` (0..1) of the budget is spent.

    A constant rate leaves the net bouncing around the noise floor of its last batches; decaying
    it to ~0.1x by the end averages over more of them, which the final (graded) weights profit from.
    """
    if schedule == "constant":
        return 1.0
    p = min(1.0, max(0.0, progress))
    return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + math.cos(math.pi * p))


def warmup_factor(step: int, warmup_steps: int) -> float:
    """Multiplier of the learning rate over the first ``warmup_steps`` steps: (step + 1) / warmup_steps, then 1.

    Adam moves every weight by about the learning rate from the first step, whatever the gradient's size, so
    the value head's hidden layer (1,344 inputs a unit) swung its units negative for every position within
    the first few hundred steps at full rate: 3 of its 64 ReLUs still fired at step 600, and in one run none,
    leaving a constant value. Ramping the rate up keeps ~50 of 64 alive (docs/ARCHITECTURE.md)."""
    return 1.0 if step >= warmup_steps else (step + 1) / warmup_steps


class Learner:
    def __init__(self, cfg: Config, game: Game, precision: Precision, info: DistInfo, seed: int):
        self.cfg, self.game, self.precision = cfg, game, precision
        self.device = precision.device
        # held while a step is traced and run on XLA, where the leaf server (another thread) uses it too (leaf_server)
        self.device_lock = threading.Lock()
        # NHWC on a CPU: oneDNN's convolutions and their gradients run faster in it (a 32x4 step, batch 256, one
        # thread, fp32, on a 2-core AVX512-VNNI Xeon: 106-113 ms against 134-144); weights read the same either way
        self.memory_format = torch.channels_last if self.device.type == "cpu" else torch.contiguous_format
        self.model = build_model(game, cfg.model.channels, cfg.model.blocks, cfg.model.policy_filters,
                                 cfg.model.value_filters).to(self.device, memory_format=self.memory_format)
        self.trainable = self.model
        if info.enabled:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.trainable = DistributedDataParallel(self.model, device_ids=ids)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=cfg.learner.lr,
                                           weight_decay=cfg.learner.weight_decay)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=precision.use_grad_scaler)
        self.rng = np.random.default_rng(seed)
        self.last_planes: np.ndarray | None = None
        # An exponential moving average of the weights (BatchNorm statistics included) grades and plays in the
        # arena: the last few hundred steps' noise averages out instead of deciding the final figures.
        half_life = cfg.learner.ema_half_life_steps
        self.ema = AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(0.5 ** (1 / half_life)),
                                 use_buffers=True) if half_life else None

    def set_progress(self, progress: float | None, step: int) -> float:
        """Set the learning rate for learner step ``step`` and ``progress`` of the budget (None: no budget, no
        decay); return it."""
        lr = self.cfg.learner.lr * warmup_factor(step, self.cfg.learner.warmup_steps)
        if progress is not None:
            lr *= lr_factor(progress, self.cfg.learner.lr_schedule, self.cfg.learner.lr_final_fraction)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def value_target(self, batch: dict) -> np.ndarray:
        kind = self.cfg.learner.value_target
        if kind == "z":
            return batch["z"]
        if kind == "q":
            return batch["q"]
        return 0.5 * (batch["z"] + batch["q"])

    def step(self, batch: dict) -> dict[str, float]:
        game = self.game
        planes = game.encode(batch["states"])
        policy = batch["policy"].copy()
        flip = self.rng.random(len(planes)) < 0.5  # horizontal mirror: the game is symmetric
        if flip.any():
            planes[flip] = game.flip_planes(planes[flip])
            policy[flip] = game.flip_policy(policy[flip])
        self.last_planes = planes  # what value_units_firing looks at
        with self.device_lock if self.device.type == "xla" else nullcontext():
            return self._step(planes, policy, batch)

    def _step(self, planes: np.ndarray, policy: np.ndarray, batch: dict) -> dict[str, float]:
        x = torch.from_numpy(planes).to(self.device, non_blocking=True).contiguous(memory_format=self.memory_format)
        target_pi = torch.from_numpy(policy).to(self.device, non_blocking=True)
        target_v = torch.from_numpy(self.value_target(batch).astype(np.float32)).to(self.device, non_blocking=True)

        self.trainable.train()
        with self.precision.autocast():
            logits, value = self.trainable(x)
        log_pi = F.log_softmax(logits.float(), dim=1)
        policy_loss = -(target_pi * log_pi).sum(dim=1).mean()
        value_loss = F.mse_loss(value.float(), target_v)
        loss = policy_loss + value_loss
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.ema is not None:
            self.ema.update_parameters(self.model)
        # entropy of the targets: the floor the policy loss can reach
        target_entropy = -(target_pi * torch.log(target_pi.clamp_min(1e-12))).sum(dim=1).mean()
        losses = torch.stack([policy_loss, value_loss, loss, target_entropy]).detach()
        if self.device.type == "xla":
            # XLA traces lazily: cut the graph here so the step, the optimizer and the average run as ONE compiled
            # program (the same every step, compiled once) instead of piling up until a value is read
            import torch_xla
            torch_xla.sync()
        policy, value, total, entropy = losses.tolist()  # one transfer, not four
        return {POLICY_LOSS_KEY: policy, VALUE_LOSS_KEY: value, LOSS_KEY: total,
                "losses/policy_target_entropy": entropy}

    def value_units_firing(self) -> float | None:
        """model.value_units_firing on the last batch (None before the first step), for the progress records."""
        if self.last_planes is None:
            return None
        with self.device_lock if self.device.type == "xla" else nullcontext():
            self.model.eval()  # running statistics, untouched; the next step sets train() again
            x = torch.from_numpy(self.last_planes).to(self.device)
            with self.precision.autocast():
                return value_units_firing(self.model, x)

    def playing_model(self) -> torch.nn.Module:
        """The weights to grade and to pit against others: the moving average when kept (Checkpoint.playing_weights)."""
        return self.ema.module if self.ema is not None else self.model

    def state_dict(self) -> dict:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "scaler": self.scaler.state_dict()}
        if self.ema is not None:
            state["ema"] = self.ema.module.state_dict()
        if self.device.type == "xla":  # checkpoints hold host tensors: XLA ones pickle only where torch_xla is
            state = to_cpu(state)
        return state

    def load_state_dict(self, payload: dict) -> None:
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        # AdamW's load_state_dict brings back the saved run's hyperparameters with its moments; the resuming run's
        # config decides them, as it decides the learning rate (set_progress sets it every step)
        for group in self.optimizer.param_groups:
            group["weight_decay"] = self.cfg.learner.weight_decay
        stem = self.model.stem[0]
        moments = self.optimizer.state.get(stem.weight, {})  # Adam's, for a stem saved with fewer input planes
        for key in ("exp_avg", "exp_avg_sq"):
            if key in moments:
                moments[key] = widen_input_planes(moments[key], stem.in_channels)
        if payload.get("scaler"):
            self.scaler.load_state_dict(payload["scaler"])
        if self.ema is not None:  # a run that kept no average starts one from its weights
            self.ema.module.load_state_dict(payload.get("ema") or payload["model"])
            self.ema.n_averaged.fill_(1)  # averaging from here on, not copying the next step's weights
