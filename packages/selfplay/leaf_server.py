"""Leaf evaluation served from the learner's device: actors search on their cores, the GPU runs the network.

On a GPU node an actor's own CPU forward pass is the slowest part of self-play, while the GPU
next to it idles between learner steps. With ``actors.inference=learner`` each actor sends
its batch of leaves to the learner process instead; a thread there gathers whatever every
actor has sent, runs it as ONE batch on the learner's device and writes the answers back.

The transport is shared memory plus one pipe per actor:

    actor i:   write planes into slot i  -> send n over pipe i           -> block on pipe i
    server:    wait on all pipes -> gather ready slots -> one forward -> write logits/values
               into each slot -> send the weights version over each pipe

Only a few bytes cross the pipes; planes and answers never get pickled. The server swaps in a
new BatchNorm-folded copy of the learner's model each time the learner publishes weights, and
every answer carries the version that produced it, so positions stay stamped as in local mode.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from contextlib import nullcontext
from multiprocessing import connection
from multiprocessing import shared_memory as shm_lib

import numpy as np
import torch

from .model import PolicyValueNet, fold_batchnorm

log = logging.getLogger("selfplay")


def host_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` with every tensor on the host, made by transfers alone: nothing is traced on the device
    (a plain deepcopy of an XLA model clones on the device, lazily)."""
    memo = {id(p): torch.nn.Parameter(p.detach().cpu(), requires_grad=p.requires_grad) for p in model.parameters()}
    memo.update({id(b): b.detach().cpu() for b in model.buffers()})
    return copy.deepcopy(model, memo)


def bucket_size(n: int, most: int) -> int:
    """The padded batch size for ``n`` leaves on XLA: the next power of two (at least 8), at most ``most``."""
    return max(n, min(most, max(8, 1 << (n - 1).bit_length())))


class LeafSlots:
    """Per-actor request/answer areas in one shared-memory block: planes, logits and values for ``capacity`` leaves."""

    def __init__(self, actors: int, capacity: int, plane_shape: tuple[int, ...], actions: int,
                 name: str | None = None):
        self.actors, self.capacity = actors, capacity
        self.plane_shape, self.actions = tuple(plane_shape), actions
        planes = int(np.prod(plane_shape))
        per_leaf = planes + actions + 1
        self.owner = name is None
        self.shm = shm_lib.SharedMemory(create=True, size=4 * actors * capacity * per_leaf) if self.owner \
            else shm_lib.SharedMemory(name=name)
        self.name = self.shm.name
        self._flat = flat = np.ndarray((actors, capacity, per_leaf), dtype=np.float32, buffer=self.shm.buf)
        # views into the block; their rows belong to one actor each
        self.planes = flat[:, :, :planes].reshape(actors, capacity, *plane_shape)
        self.logits = flat[:, :, planes:planes + actions]
        self.values = flat[:, :, planes + actions]

    def spec(self) -> dict:
        """What an actor needs to attach (picklable)."""
        return {"actors": self.actors, "capacity": self.capacity, "plane_shape": self.plane_shape,
                "actions": self.actions, "name": self.name}

    def close(self) -> None:
        # views must go before the buffer can be released
        self.planes = self.logits = self.values = self._flat = None
        self.shm.close()
        if self.owner:
            self.shm.unlink()


class RemoteEvaluator:
    """The actor's side: same call as ``NetworkEvaluator`` (planes -> logits, values), answered by the server."""

    def __init__(self, slots: LeafSlots, actor_id: int, pipe: connection.Connection):
        self.slots, self.actor_id, self.pipe = slots, actor_id, pipe
        self.version = -1  # weights version of the newest answer
        self.seconds = 0.0
        self.positions = 0
        self.calls = 0

    def __call__(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        start = time.perf_counter()
        n = len(planes)
        if n > self.slots.capacity:
            raise ValueError(f"{n} leaves exceed the slot's capacity of {self.slots.capacity}")
        i = self.actor_id
        self.slots.planes[i, :n] = planes
        self.pipe.send_bytes(n.to_bytes(4, "little"))
        self.version = int.from_bytes(self.pipe.recv_bytes(), "little", signed=True)  # EOFError: the server is gone
        out = self.slots.logits[i, :n].copy(), self.slots.values[i, :n].copy()
        self.seconds += time.perf_counter() - start
        self.positions += n
        self.calls += 1
        return out

    def sync(self) -> int:
        """The weights version to stamp the next move with; the first call waits for the server's first answer."""
        if self.version < 0:
            self(np.zeros((1, *self.slots.plane_shape), dtype=np.float32))
        return self.version

    def close(self) -> None:
        self.slots.close()


class LeafServer:
    """The learner's side: a thread that answers every actor's leaves with one forward pass on ``device``."""

    def __init__(self, slots: LeafSlots, device: torch.device, dtype: torch.dtype | None,
                 lock: threading.Lock | None = None):
        self.slots, self.device, self.dtype = slots, device, dtype
        # XLA: the learner's device lock (Learner.device_lock). torch_xla traces lazily and a sync compiles every
        # pending operation on the device, whichever thread traced it: a forward pass half traced here when the
        # learner's step syncs would be cut at a random point and compiled anew each time.
        self.lock = lock or nullcontext()
        self.pipes: list[connection.Connection | None] = [None] * slots.actors
        self._net: PolicyValueNet | None = None
        self._version = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="leaf-server", daemon=True)
        self.error: BaseException | None = None
        self.batches = 0
        self.positions = 0
        self.seconds = 0.0

    def attach(self, actor_id: int, pipe: connection.Connection) -> None:
        """(Re)connect an actor; a restarted actor gets a fresh pipe in the same slot."""
        self.pipes[actor_id] = pipe  # the old one closes when the serving thread lets go of it

    def publish(self, model: PolicyValueNet, version: int) -> None:
        """Serve from a folded copy of ``model`` from now on (called by the learner after a step)."""
        if self.device.type == "xla":  # fold on the host, then upload: folding on the device would be traced
            net = fold_batchnorm(host_copy(model)).to(self.device)  # into the learner's next program
        else:
            net = fold_batchnorm(model)
        self._net, self._version = net, version  # references swapped between batches

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                self.serve_once(timeout=0.1)
        except BaseException as e:  # surfaced by the training loop's check(), not lost in a thread
            self.error = e
            log.exception("leaf server failed")

    def serve_once(self, timeout: float) -> int:
        """Answer every request that is ready within ``timeout``; return the leaves evaluated."""
        live = {p: i for i, p in enumerate(self.pipes) if p is not None}
        if not live or self._net is None:
            time.sleep(min(timeout, 0.01))
            return 0
        requests = []
        for pipe in connection.wait(list(live), timeout=timeout):
            i = live[pipe]
            try:
                n = int.from_bytes(pipe.recv_bytes(), "little")
            except (EOFError, OSError):  # the actor died; the pool restarts it with a new pipe
                if self.pipes[i] is pipe:
                    self.pipes[i] = None
                pipe.close()
                continue
            requests.append((i, pipe, n))
        if not requests:
            return 0
        start = time.perf_counter()
        net, version = self._net, self._version
        planes = np.concatenate([self.slots.planes[i, :n] for i, _, n in requests])
        total = len(planes)
        if self.device.type == "xla":
            # XLA compiles one program per input shape: batches padded to a power of two keep that to a handful
            # (log2 of all actors' leaves) instead of one compilation for every batch size the actors produce
            padded = np.zeros((bucket_size(total, self.slots.actors * self.slots.capacity), *planes.shape[1:]),
                              dtype=planes.dtype)
            padded[:total] = planes
            x = torch.from_numpy(padded).to(self.device)  # XLA tensors have no strides, so no channels-last
        else:
            # channels-last like the folded net: oneDNN's fastest layout, and the one tensor cores want
            x = torch.from_numpy(planes).to(self.device, non_blocking=True).contiguous(
                memory_format=torch.channels_last)
        autocast = torch.autocast(self.device.type, dtype=self.dtype) if self.dtype is not None else nullcontext()
        with self.lock, torch.inference_mode(), autocast:
            logits, values = net(x)
            # one tensor, one transfer: on XLA each transfer runs its own program, so two would run the net twice
            out = torch.cat([logits.float(), values.float().unsqueeze(1)], dim=1).cpu().numpy()[:total]
        logits, values = out[:, :-1], out[:, -1]
        at = 0
        answer = version.to_bytes(8, "little", signed=True)
        for i, pipe, n in requests:
            self.slots.logits[i, :n] = logits[at:at + n]
            self.slots.values[i, :n] = values[at:at + n]
            at += n
            try:
                pipe.send_bytes(answer)
            except (BrokenPipeError, OSError):
                pass  # died after asking; check() restarts it
        self.batches += 1
        self.positions += at
        self.seconds += time.perf_counter() - start
        return at
