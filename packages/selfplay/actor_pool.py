"""Starts, watches, restarts and stops the actor processes of one learner."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import queue as queue_lib
import time
from contextlib import contextmanager

from .actors import THREAD_ENV, Samples, actor_main
from .errors import RunError
from .leaf_server import LeafServer

log = logging.getLogger("selfplay")


@contextmanager
def _single_threaded_children():
    """Spawned children read these before torch starts its thread pools."""
    saved = {k: os.environ.get(k) for k in THREAD_ENV}
    os.environ.update({k: "1" for k in THREAD_ENV})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class ActorPool:
    def __init__(self, count: int, config_dict: dict, weights_name: str, numel: int, seed: int,
                 restart_limit: int, server: LeafServer | None = None):
        self.ctx = mp.get_context("spawn")
        self.server = server  # None: each actor runs the network itself
        self.count, self.config_dict = count, config_dict
        self.weights_name, self.numel, self.seed = weights_name, numel, seed
        self.restart_limit = restart_limit
        self.queue = self.ctx.Queue(maxsize=8 * max(1, count))
        self.stop_event = self.ctx.Event()
        self.procs: list = [None] * count
        self.restarts = 0
        self.starts = 0
        # the newest cumulative counters reported by each actor (keyed by pid, so restarts add up)
        self.counters: dict[int, dict] = {}

    def _start(self, actor_id: int) -> None:
        seed = self.seed * 1000 + actor_id * 97 + self.starts
        self.starts += 1
        leaf = ours = None
        if self.server is not None:
            ours, theirs = self.ctx.Pipe()
            leaf = (self.server.slots.spec(), theirs)
        p = self.ctx.Process(target=actor_main, name=f"actor-{actor_id}", daemon=True,
                             args=(actor_id, self.config_dict, self.weights_name, self.numel, self.queue,
                                   self.stop_event, seed, leaf))
        with _single_threaded_children():
            p.start()
        if ours is not None:
            theirs.close()  # only the child holds its end now, so its death reads as EOF on ours
            self.server.attach(actor_id, ours)
        self.procs[actor_id] = p

    def start(self) -> None:
        for i in range(self.count):
            self._start(i)

    def check(self) -> list[str]:
        """Restart dead actors; return one message per restart. Raises when the restart budget is spent."""
        if self.server is not None and self.server.error is not None:
            raise RunError(f"the leaf server stopped: {self.server.error!r}") from self.server.error
        events = []
        for i, p in enumerate(self.procs):
            if p is not None and not p.is_alive() and not self.stop_event.is_set():
                code = p.exitcode
                if self.restarts >= self.restart_limit:
                    raise RunError(f"actor {i} died (exit code {code}) and {self.restarts} restarts are spent: "
                                       f"see the traceback above, or raise actors.restart_limit")
                self.restarts += 1
                events.append(f"actor {i} (pid {p.pid}) died with exit code {code}; restarted "
                              f"({self.restarts}/{self.restart_limit})")
                self._start(i)
        return events

    def get(self, timeout: float) -> list[Samples]:
        """Everything the actors have sent, waiting up to ``timeout`` for the first message."""
        out = []
        try:
            msg = self.queue.get(timeout=timeout) if timeout > 0 else self.queue.get_nowait()
            while True:
                out.append(msg["samples"])
                self.counters[msg["pid"]] = msg
                msg = self.queue.get_nowait()
        except queue_lib.Empty:
            pass
        return out

    def totals(self) -> dict[str, float]:
        keys = ("moves", "simulations", "evals", "calls", "forward_s", "busy_s")
        return {k: float(sum(m[k] for m in self.counters.values())) for k in keys}

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        while any(p is not None and p.is_alive() for p in self.procs) and time.monotonic() < deadline:
            self.get(timeout=0.05)  # drain so no actor blocks on a full queue
        for p in self.procs:
            if p is not None and p.is_alive():
                p.kill()
            if p is not None:
                p.join(timeout=1.0)
        self.queue.close()
        self.queue.cancel_join_thread()
