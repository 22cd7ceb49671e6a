"""Process-group plumbing: pick the backend once, explicit timeouts, agree on every step.

A single process (no WORLD_SIZE, or 1) never touches torch.distributed. Under torchrun
every rank runs its own actors and replay buffer; learners average gradients with DDP
and take exactly the same steps, because each step is preceded by a tiny all-reduce in
which the ranks agree that all of them have data (and whether any wants to stop).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from launch_contract import LOCAL_RANK_ENV

from .errors import RunError, SelfplayError
from .hardware import cuda_usable

GROUP_WORLD_SIZE_ENV = "GROUP_WORLD_SIZE"  # set by torchrun in each rank's process: the number of machines


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    nodes: int = 1  # machines the ranks run on (torchrun's --nnodes): what a lost rank's line tells to start again

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


class LostRankError(SelfplayError, RuntimeError):
    """Another rank stopped answering: the run ends (rank 0 checkpoints) instead of hanging."""


class PeerStoppedError(SelfplayError, RuntimeError):
    """The group stopped because another rank was signalled, not this one: not a finished run (exit non-zero)."""


def is_collective_failure(error: BaseException) -> bool:
    """Errors raised when a peer died or the network between ranks broke (gloo, nccl, store timeouts)."""
    if isinstance(error, dist.DistError):
        return True
    text = str(error).lower()
    return any(word in text for word in ("gloo", "nccl", "connection", "timed out", "timeout", "peer"))


def choose_backend(requested: str) -> str:
    if requested == "nccl":
        if not cuda_usable():
            raise RunError("dist.backend=nccl needs a working CUDA GPU on every node: use dist.backend=gloo "
                               "(or auto) on CPU machines")
        return "nccl"
    if requested == "gloo":
        return "gloo"
    return "nccl" if cuda_usable() else "gloo"


def init_distributed(backend: str, timeout_s: float) -> DistInfo:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    chosen = choose_backend(backend)  # even alone: dist.backend=nccl on a machine without CUDA is an error
    if world <= 1:
        return DistInfo()
    # torchrun names the machines in GROUP_WORLD_SIZE; a launch it did not make counts as many machines, the
    # safe reading for what to start again
    nodes = int(os.environ.get(GROUP_WORLD_SIZE_ENV, str(world)))
    if dist.is_initialized():  # e.g. a caller set it up already: reuse it
        return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get(LOCAL_RANK_ENV, "0")),
                        dist.get_backend(), nodes)
    local_rank = int(os.environ.get(LOCAL_RANK_ENV, "0"))
    if chosen == "nccl":
        torch.cuda.set_device(local_rank)
    try:
        dist.init_process_group(chosen, timeout=timedelta(seconds=timeout_s))
    except RuntimeError as error:  # a peer that failed first (a bad run.dir) closes its end of the mesh: one line
        if not is_collective_failure(error):
            raise
        raise LostRankError(f"rank {os.environ.get('RANK', '?')} could not form the process group "
                            f"({first_words(str(error))}): another rank failed first and its error says why; fix "
                            f"that, then {start_again(nodes)[0]}") from None
    return DistInfo(dist.get_rank(), dist.get_world_size(), local_rank, chosen, nodes)


def agree(ready: bool, stop: bool, info: DistInfo, device: torch.device, progress: float = 0.0,
          saved_step: int | None = None, out_of_time: bool = False) -> tuple[bool, bool, float, int | None, bool]:
    """(all ranks ready, any rank stopping, mean progress, rank 0's newest checkpoint step, any rank out of its time
    budget). One 5-int all-reduce; free without a process group.

    ``progress`` (0..1 of the time budget) sets the learning rate: ranks' clocks differ slightly, and
    one rate on every rank keeps DDP's replicas identical. ``saved_step`` counts on rank 0 only, the one
    that writes checkpoints: a rank that loses rank 0 can then say which checkpoint the run resumes from.
    ``out_of_time`` is agreed for the same reason as progress: the rank whose clock runs out first stops every rank,
    and rank 0, which records why the run ended, must know it was the budget.
    """
    if not info.enabled:
        return ready, stop or out_of_time, progress, saved_step, out_of_time
    saved = saved_step + 1 if info.is_main and saved_step is not None else 0  # 0: none
    flags = torch.tensor([0 if ready else 1, 1 if stop else 0, round(min(1.0, max(0.0, progress)) * 100_000), saved,
                          1 if out_of_time else 0], dtype=torch.int64, device=device if info.backend == "nccl" else "cpu")
    dist.all_reduce(flags, op=dist.ReduceOp.SUM)
    return (int(flags[0]) == 0, int(flags[1]) > 0 or int(flags[4]) > 0, int(flags[2]) / 100_000 / info.world_size,
            int(flags[3]) - 1 if int(flags[3]) else None, int(flags[4]) > 0)


def start_again(nodes: int) -> tuple[str, str]:
    """What a lost rank's line tells the user to do, and the same as a gerund. On one machine there are no other
    nodes to start: the one command that launched the ranks starts them all again."""
    if nodes > 1:
        return "start every node again", "starting every node again"
    return "run the same command again", "running the same command again"


def first_words(text: str, limit: int = 160) -> str:
    """What a collective's error says, for one line: its first sentence without gloo's source location
    ("[.../pair.cc:537] Read error ...: Connection reset by peer. This is typically caused by ..."), cut at a
    word if it is still long."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\] ", "", line).split(". ", 1)[0].rstrip(".")
    if len(line) <= limit:
        return line
    return line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def broadcast_state(state: dict | None, info: DistInfo) -> dict | None:
    """Rank 0's learner state (weights, optimizer moments, scaler) to every rank.

    A resumed checkpoint lives on rank 0's disk only; without its optimizer moments the other
    ranks' AdamW would drift from rank 0 even though the gradients are averaged.
    """
    if not info.enabled:
        return state
    box = [to_cpu(state) if info.is_main else None]  # pickled: CUDA tensors would land on rank 0's device
    dist.broadcast_object_list(box, src=0)
    return box[0]


def to_cpu(obj):
    """A nested dict/list of tensors with every tensor on the host (CUDA or XLA tensors copied there)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def close(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()
