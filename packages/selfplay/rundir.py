"""The run's folder: a local folder, held by one trainer at a time.

A run's folder is where it resumes from: run the same command again after Ctrl-C, SIGTERM or a crash. The trainer
writes only here. On a node the folder is one of the launch's --sync folders (the kit's gantry.yaml: sync), which
the node's agent copies to the bucket, puts back on a restarted or new node, and prunes there as the trainer prunes
its checkpoints: the one store every program's outputs go through (gantry_agent/sync.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from . import checkpoint
from .errors import ConfigError

LOCK_FILE = ".trainer.lock"  # in the run folder: who trains into it now


class RunDir:
    def __init__(self, run_dir: str):
        self.local = Path(run_dir)

    def prepare(self) -> None:
        """Check the folder can be written before anything is trained, hold it, drop a checkpoint a crash cut short."""
        where = f"run.dir {self.local}"
        try:
            self.local.mkdir(parents=True, exist_ok=True)
            probe = self.local / f".write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except (FileExistsError, NotADirectoryError):
            raise ConfigError(f"{where}: a file stands where the folder should be; choose another --run.dir") from None
        except OSError as e:
            raise ConfigError(f"{where} cannot be written ({e.strerror}): choose a folder you can write, "
                              f"e.g. --run.dir=runs/NAME") from None
        self.lock(where)
        checkpoint.remove_partial(self.local)  # a crash or a full disk mid-write left it: it only takes room

    def lock(self, where: str) -> None:
        """Hold the run folder for this process's life (an flock, which the kernel drops when the process ends, however
        it ends): a second trainer on the same folder would interleave stats.jsonl and replace the first's
        checkpoints. It is refused in one line naming the holder."""
        import fcntl
        import socket

        held = open(self.local / LOCK_FILE, "a+")  # noqa: SIM115 (held open until the process ends)
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            held.seek(0)
            holder = held.read().strip() or "another process"
            held.close()
            raise ConfigError(f"{where} is in use: the trainer {holder} writes it; wait for it to end (Ctrl-C "
                              "checkpoints it) or give this run another --run.dir") from None
        held.seek(0)
        held.truncate()
        held.write(f"PID {os.getpid()} on {socket.gethostname()}\n")
        held.flush()
        self._lock = held
