"""A TPU VM's run output in the run's bucket folder (Cloud TPU has no serial port API)."""

from __future__ import annotations

import os
import threading
import time

from . import storage
from .metadata import MetadataError


class ConsoleLog:
    """A run's output on this node as one object in the run's folder (console_log_url), for `gantry logs` on a TPU
    VM, which has no serial port API. Lines go to a local copy; the whole copy is uploaded once ``upload_seconds``
    have passed since the last upload, and by ``flush`` (the agent's loop, the end of a container), so the launcher
    trails the trainer by seconds. Whole-object uploads, because a Cloud Storage object cannot be appended to; past
    MAX_BYTES the oldest half is dropped, as a serial port keeps only its last megabyte."""

    MAX_BYTES = 4 * 1024 * 1024

    def __init__(self, url: str, local_path: str, token, storage_url: str, upload_seconds: float):
        self.url, self.local_path, self.token = url, local_path, token  # token(): the VM's access token
        self.storage_url, self.upload_seconds = storage_url, upload_seconds
        self.lock = threading.Lock()
        # the first write uploads at once, whatever the machine's monotonic clock reads (it starts near 0 at boot)
        self.dirty, self.uploaded_at = False, float("-inf")

    def write(self, text: str) -> None:
        with self.lock:
            try:
                os.makedirs(os.path.dirname(self.local_path), exist_ok=True)
                with open(self.local_path, "a", encoding="utf-8", errors="replace") as out:
                    out.write(text)
            except OSError:
                return
            self.dirty = True
            due = time.monotonic() - self.uploaded_at >= self.upload_seconds
        if due:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            if not self.dirty:
                return
            try:
                data = self._trimmed()
                self._upload(data)
                self.dirty, self.uploaded_at = False, time.monotonic()
            except (OSError, storage.StorageError, MetadataError) as exc:
                self.uploaded_at = time.monotonic()  # the next try waits its turn: no upload storm while offline
                print(f"gantry-agent: could not upload the run's output to {self.url}: {exc}", flush=True)

    def _trimmed(self) -> bytes:
        with open(self.local_path, "rb") as local:
            data = local.read()
        if len(data) > self.MAX_BYTES:
            data = data[-self.MAX_BYTES // 2:]
            data = b"gantry-agent: (earlier output dropped)\n" + data[data.find(b"\n") + 1:]
            with open(self.local_path, "wb") as local:
                local.write(data)
        return data

    def _upload(self, data: bytes) -> None:
        # overwriting the object needs objectAdmin, which the node's service account holds (infra/iam.tf)
        storage.upload(self.url, data, self.token, self.storage_url, "text/plain; charset=utf-8", timeout=60)
