"""Atomic checkpoints in a run directory: ``ckpt-<step>.pt``, newest k kept, resume by default.

A checkpoint is written to a temporary name and renamed, so a crash mid-write leaves the
previous one intact. Loading never falls back silently: a corrupt or mismatched file is an
error that names the file and the fix. What a checkpoint holds is a Checkpoint; on disk it is
the plain dict of its fields (torch.load's weights_only reads plain containers and tensors only),
as it was before the class, so every checkpoint written since loads the same way.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch
from launch_contract import partial_name

from .config import Config
from .config_io import with_legacy_shape
from .errors import CheckpointError

NAME = re.compile(r"^ckpt-(\d{9})\.pt$")
REQUIRED = ("model", "step", "config")  # what every selfplay checkpoint has held; the rest came later or is optional


@dataclass
class Checkpoint:
    """What ckpt-<step>.pt holds: enough to resume the run exactly, and to play or grade its weights."""

    step: int
    """The learner steps taken."""
    config: dict
    """The run's resolved config (Config.to_dict()); resuming checks its shape fields against the new one's."""
    model: dict
    """The learner's raw weights (a state_dict), which a resumed run continues from."""
    optimizer: dict | None = None
    """The optimizer's state (AdamW moments, the step count)."""
    scaler: dict | None = None
    """The GradScaler's state (fp16 only; empty otherwise)."""
    ema: dict | None = None
    """The moving average of the weights, when the run keeps one (learner.ema_decay)."""
    counters: dict = field(default_factory=dict)
    """games, positions, plies, draws, actor_restarts so far."""
    replay: dict | None = None
    """The replay buffer (ReplayBuffer.state_dict()), so a resumed learner does not start from an empty one."""

    def playing_weights(self) -> dict:
        """The weights that play and are graded: the learner's moving average when the run kept one, else its own.

        ``model`` stays the learner's raw weights, which a resumed run continues from."""
        return self.ema or self.model

    def selfplay_weights(self) -> dict:
        """The weights self-play played with at this step: the learner's own, which train.py publishes to the
        actors (every learner.publish_every steps), not the moving average that is graded."""
        return self.model

    def learner_state(self) -> dict:
        """What Learner.load_state_dict takes: model, and optimizer, scaler, ema where the checkpoint has them."""
        state = {"model": self.model, "optimizer": self.optimizer, "scaler": self.scaler, "ema": self.ema}
        return {k: v for k, v in state.items() if v is not None}

    def to_dict(self) -> dict:
        """The dict torch.save writes: the fields by name, None ones left out (as older checkpoints did)."""
        saved = {f.name: getattr(self, f.name) for f in fields(self)}  # not asdict(): it deep-copies every tensor
        return {k: v for k, v in saved.items() if v is not None}

    @classmethod
    def from_dict(cls, payload: dict) -> Checkpoint:
        """A loaded dict, old or new: missing optional fields take their defaults, unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        ckpt = cls(**{k: v for k, v in payload.items() if k in known})
        ckpt.step = int(ckpt.step)
        return ckpt


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / f"ckpt-{step:09d}.pt"


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoints of a run, oldest first."""
    d = Path(run_dir)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if NAME.match(p.name))


# A write a crash or a full disk interrupted: the contract's partial name (.ckpt-N.pt.part, which the node's agent
# never copies to the bucket), or .ckpt-N.pt.tmp-PID, the name runs written before 2026-12-07 may have left.
PARTIAL = re.compile(r"^\.ckpt-\d{9}\.pt\.(part|tmp-\d+)$")


def remove_partial(run_dir: str | Path) -> list[Path]:
    """Delete half-written checkpoints left by a crash (called at start, before anything else writes)."""
    d = Path(run_dir)
    stale = [p for p in d.iterdir() if PARTIAL.match(p.name)] if d.is_dir() else []
    for p in stale:
        p.unlink(missing_ok=True)
    return stale


def save(run_dir: str | Path, ckpt: Checkpoint, keep: int = 3) -> Path:
    """Write ckpt-<step>.pt atomically and keep the newest ``keep``; on a full disk, remove the partial file,
    keep every earlier checkpoint and raise CheckpointError saying how much room is missing."""
    d = Path(run_dir)
    d.mkdir(parents=True, exist_ok=True)
    final = checkpoint_path(d, ckpt.step)
    tmp = final.with_name(partial_name(final.name))  # one writer: RunDir holds the folder
    try:
        with open(tmp, "wb") as f:
            torch.save(ckpt.to_dict(), f)
            f.flush()
            os.fsync(f.fileno())
    except (OSError, RuntimeError) as e:  # torch reports ENOSPC as RuntimeError ("unexpected pos ...")
        written = tmp.stat().st_size if tmp.exists() else 0
        tmp.unlink(missing_ok=True)
        free = shutil.disk_usage(d).free
        if not (isinstance(e, OSError) and e.errno == errno.ENOSPC) and free >= 1 << 20:
            raise  # not the disk: a real bug, with its traceback
        newest = latest(d)
        need = newest.stat().st_size if newest else written
        raise CheckpointError(
            f"disk full at {d} ({free / 1e6:.0f} MB free, a checkpoint needs about {need / 1e6:.0f} MB): the "
            f"partial file is removed and earlier checkpoints are kept; free space, then run the same "
            f"command to resume") from None
    os.replace(tmp, final)
    for old in list_checkpoints(d)[:-keep]:
        old.unlink(missing_ok=True)
    return final


def load(path: str | Path, shown_as: str | None = None) -> Checkpoint:
    """The checkpoint at ``path``; a refusal names it as ``shown_as`` where the file is a local copy of one kept
    elsewhere (a bucket's)."""
    file = Path(path)
    shown = shown_as or file
    try:
        payload = torch.load(file, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(
            f"checkpoint {shown} not found: pass a ckpt-*.pt file or a run directory that holds one") from None
    except Exception as e:  # noqa: BLE001 -- torch raises many types for truncated or foreign files
        raise CheckpointError(
            f"checkpoint {shown} is corrupt or not a Gantry checkpoint ({type(e).__name__}): move it aside to resume "
            f"from the one before it, or start a new run.dir") from None
    if not isinstance(payload, dict) or any(key not in payload for key in REQUIRED):
        raise CheckpointError(f"checkpoint {shown} lacks model/step/config: it was not written by selfplay; "
                              f"start a new run.dir")
    return Checkpoint.from_dict(payload)


def latest(run_dir: str | Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def resolve(path_or_dir: str | Path) -> Path:
    """A checkpoint file, or the newest checkpoint of a run directory."""
    p = Path(path_or_dir)
    if p.is_dir():
        newest = latest(p)
        if newest is None:
            raise CheckpointError(f"no checkpoint (ckpt-*.pt) in {p}: train first (make train-local) or pass a file")
        return newest
    if not p.exists():
        raise CheckpointError(f"checkpoint {p} not found: pass a ckpt-*.pt file or a run directory that holds one")
    return p


def check_resumes(saved: Checkpoint, cfg: Config, path: str | Path) -> None:
    """Refuse in one line a config that cannot continue ``saved``: another game or another net shape. train asks it
    of the checkpoint it resumes; `selfplay check --resume` asks it first, on the laptop, of the bucket's newest."""
    check_compatible(with_legacy_shape(saved.config), cfg.to_dict(), Config.SHAPE_FIELDS, path)


def check_compatible(saved_config: dict, config_dict: dict, fields: tuple[str, ...], path: str | Path) -> None:
    """Refuse to resume when the game or the network's shape differs from the checkpoint's."""
    for dotted in fields:
        section, key = dotted.split(".")
        old = saved_config.get(section, {}).get(key)
        new = config_dict[section][key]
        if old != new:
            # a changed default (connect4.yaml's net went 32 -> 48 wide) meets every run made before it
            again = f"resume it with --{dotted}={old}" if old is not None else "use the run's original config"
            raise CheckpointError(
                f"checkpoint {path} was trained with {dotted}={old!r} but this run asks for {dotted}={new!r}: "
                f"{again}, or a new run.dir to start fresh")
