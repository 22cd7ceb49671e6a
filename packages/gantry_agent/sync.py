"""A run's --sync folders in the bucket: the folders a program writes its checkpoints to outlive the node.

Each folder is a host folder under the run's folder (local_folder), mounted at WORKDIR/DIR in the container, and
copied by the agent, on the host, to launch_contract.sync_url(run_dir, node_rank, DIR):

    restore   before the container starts: what the bucket holds and the folder lacks (a new disk: a Spot node
              deleted, a run resumed elsewhere), or holds older and of another size, is put back, so a program
              resuming from its own checkpoints resumes
    push      every sync_seconds while it runs, when it ends, and on stop: the files changed since they were last
              copied (size and mtime); a file this node copied or restored that the program has since deleted (a
              checkpoint it pruned) is deleted in the bucket too, as the kit's trainer prunes its own, except
              while the folder holds no file at all (a program that empties its folder to start afresh does
              not empty the bucket's copy)

A program should write each checkpoint whole (a temporary name, then a rename): a file copied while it is written
is copied again once its size or mtime changes, but the bucket holds the half one until then. A temporary name by
the contract's partial rule (.NAME.part, launch_contract.partial_name) is never copied: the kit's trainer writes its
checkpoints so, and a push during one skips its half instead of uploading it.
"""

from __future__ import annotations

import os
import time

from launch_contract import SYNC_FOLDER, is_partial

from . import storage


def local_folder(run_folder: str, folder: str) -> str:
    """The host folder of a --sync folder: under the run's folder, so it is handed to the image's user with it."""
    return os.path.join(run_folder, SYNC_FOLDER, folder)


class FolderSync:
    """One --sync folder and its copy in the bucket (file:// or gs://)."""

    def __init__(self, local: str, url: str, token, storage_url: str):
        self.local, self.url, self.token, self.storage_url = local, url.rstrip("/"), token, storage_url
        self.copied: dict[str, tuple[int, int]] = {}  # name -> (size, mtime_ns) of the local file the bucket holds

    def restore(self) -> int:
        """Put the bucket's copy back; the number of files written. StorageError when the bucket cannot be read."""
        os.makedirs(self.local, exist_ok=True)
        written = 0
        for name, (size, updated) in storage.list_objects(self.url, self.token, self.storage_url).items():
            if not _inside(name):
                continue  # an object name no local file may have (../, //): not ours to write
            path = os.path.join(self.local, name)
            local = _stat(path)
            # A local file of another size that is newer than the bucket's is the program's (its last copy failed).
            if local is None or (local.st_size != size and local.st_mtime < updated):
                storage.download(f"{self.url}/{name}", path, self.token, self.storage_url)
                os.utime(path, (updated, updated))  # the bucket's time: the next restore finds them equal
                local, written = os.stat(path), written + 1
            if local.st_size == size and local.st_mtime <= updated + 1:  # what the bucket holds: no copy back
                self.copied[name] = (local.st_size, local.st_mtime_ns)
        return written

    def push(self, deadline: float | None = None) -> tuple[int, int]:
        """Copy the files changed since their last copy, then prune the bucket's copies of the files the program
        deleted; (files copied, a deletion counted as one, files left for the next turn because ``deadline`` (monotonic) passed).
        StorageError on the first refusal: the rest wait for the next turn."""
        copied = left = 0
        for name in self.changed():
            if deadline is not None and time.monotonic() >= deadline:
                left += 1
                continue
            stat = _stat(os.path.join(self.local, name))  # before the copy: a write during it is copied again
            if stat is None:
                continue  # deleted since: nothing to copy (and nothing is deleted in the bucket)
            timeout = 600 if deadline is None else max(1.0, deadline - time.monotonic())
            storage.upload(f"{self.url}/{name}", os.path.join(self.local, name), self.token, self.storage_url,
                           timeout=timeout)
            self.copied[name] = (stat.st_size, stat.st_mtime_ns)
            copied += 1
        gone = [name for name in self.copied if _stat(os.path.join(self.local, name)) is None]
        if gone and any(files for _, _, files in os.walk(self.local)):
            for name in gone:
                storage.delete(f"{self.url}/{name}", self.token, self.storage_url)
                del self.copied[name]
                copied += 1
        return copied, left

    def changed(self) -> list[str]:
        names = []
        for folder, _, files in os.walk(self.local):
            for file in files:
                path = os.path.join(folder, file)
                name = os.path.relpath(path, self.local).replace(os.sep, "/")
                if is_partial(name):
                    continue  # being written: copied once it is renamed whole
                stat = _stat(path)
                if stat is not None and self.copied.get(name) != (stat.st_size, stat.st_mtime_ns):
                    names.append(name)
        return sorted(names)


def _stat(path: str):
    try:
        return os.stat(path)
    except OSError:
        return None


def _inside(name: str) -> bool:
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and all(p not in ("", ".", "..") for p in parts)
