"""Run directories that may live in a bucket: write locally, mirror through fsspec.

``run.dir`` is a local path or a URL (``gs://bucket/runs/ID``, or any fsspec URL such as
``file:///mnt/share/run``). For a URL the trainer works in a local staging folder and, after
each checkpoint, copies the checkpoint, stats.jsonl and the TensorBoard event files (tb/) that
changed up; on start it pulls the newest remote checkpoint down, so a Spot VM that comes back
resumes where the bucket says.
Uploads go to a temporary name first, then move, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import logging
import os
from functools import cached_property
from pathlib import Path

from launch_contract import STAGING_ENV, STATS_FILE, STORAGE_EMULATOR_ENV, partial_name, storage_endpoint

from . import checkpoint
from .errors import ConfigError

LOCK_FILE = ".trainer.lock"  # in the run folder (the staging folder of a bucket's run): who trains into it now


def is_remote(run_dir: str) -> bool:
    return "://" in run_dir


class RunDir:
    def __init__(self, run_dir: str, staging_root: str | None = None):
        self.url = run_dir
        self.remote = is_remote(run_dir)
        if self.remote:
            root = staging_root or os.environ.get(STAGING_ENV, str(Path.home() / ".cache/gantry/staging"))
            slug = hashlib.sha256(run_dir.encode()).hexdigest()[:12]
            self.local = Path(root) / slug
        else:
            self.local = Path(run_dir)
        self.pushed: dict[Path, tuple[int, int]] = {}  # event file -> (size, mtime_ns) when last copied up

    @cached_property
    def _fs_and_root(self):
        import fsspec

        # gcsfs logs its bucket-type probe and feature flags at every call, and at ERROR with a traceback what it
        # then handles itself (a move the server refuses falls back to copy and delete) or raises to us; check_bucket
        # has said what matters, and what fails here fails the run with its own message.
        logging.getLogger("gcsfs").setLevel(logging.CRITICAL)
        return fsspec.core.url_to_fs(self.url)

    @property
    def fs(self):
        return self._fs_and_root[0]

    @property
    def root(self) -> str:
        return self._fs_and_root[1]

    def prepare(self) -> None:
        """Check where the run writes before anything is trained, then pull the bucket's newest checkpoint."""
        where = f"run.dir {self.url}" + (f" (staged in {self.local})" if self.remote else "")
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
        if self.url.startswith("gs://"):
            check_bucket(self.url)
        self.pull()

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

    def pull(self) -> None:
        """Bring the newest remote checkpoint (and the stats so far) into the staging folder."""
        if not self.remote or not self.fs.exists(self.root):
            return
        self.local.mkdir(parents=True, exist_ok=True)
        names = sorted(Path(p).name for p in self.fs.ls(self.root, detail=False))
        ckpts = [n for n in names if checkpoint.NAME.match(n)]
        wanted = ckpts[-1:] + [n for n in (STATS_FILE,) if n in names]
        for name in wanted:
            target = self.local / name
            if not target.exists():
                tmp = target.with_name(partial_name(name))
                self.fs.get(f"{self.root}/{name}", str(tmp))
                os.replace(tmp, target)

    def push(self, *paths: Path) -> None:
        """Copy files up, with the TensorBoard events that changed, and drop remote checkpoints that are no
        longer kept locally."""
        if not self.remote:
            return
        self.fs.makedirs(self.root, exist_ok=True)
        for path in paths:
            self._put(path, path.name)
        for event in sorted((self.local / "tb").rglob("*")):
            seen = event.stat()
            if event.is_file() and self.pushed.get(event) != (seen.st_size, seen.st_mtime_ns):
                self._put(event, event.relative_to(self.local).as_posix())
                self.pushed[event] = (seen.st_size, seen.st_mtime_ns)
        kept = {p.name for p in checkpoint.list_checkpoints(self.local)}
        for remote in self.fs.ls(self.root, detail=False):
            name = Path(remote).name
            if checkpoint.NAME.match(name) and name not in kept:
                self.fs.rm(remote)

    def _put(self, path: Path, relative: str) -> None:
        """Upload under a hidden name, then move: a reader never sees half a file."""
        folder, _, name = f"{self.root}/{relative}".rpartition("/")
        self.fs.makedirs(folder, exist_ok=True)
        self.fs.put(str(path), partial_name(f"{folder}/{name}"))
        self.fs.mv(partial_name(f"{folder}/{name}"), f"{folder}/{name}")


_STORAGE_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"


def check_bucket(url: str, timeout_s: float = 10) -> None:
    """Can this machine use the bucket of a gs:// run dir? One request, answered in seconds.

    gcsfs would retry for about a minute and log every attempt; this asks objects.list once
    with the machine's Application Default Credentials and turns the answer into one line.
    """
    import requests

    bucket = url.removeprefix("gs://").split("/", 1)[0]
    emulator = os.environ.get(STORAGE_EMULATOR_ENV)
    where = f"run.dir {url}"
    local = "or train into a local folder (--run.dir=runs/NAME)"
    if emulator:
        session, who = requests.Session(), f"the storage emulator at {emulator}"
    else:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
        from google.auth.transport.requests import AuthorizedSession

        try:
            credentials, _ = google.auth.default(scopes=[_STORAGE_SCOPE])
        except DefaultCredentialsError:
            raise ConfigError(f"{where}: this machine has no Google credentials: run `gcloud auth "
                              f"application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS), {local}") from None
        session = AuthorizedSession(credentials)
        who = getattr(credentials, "service_account_email", None) or "your Application Default Credentials"
    api = storage_endpoint(os.environ)
    try:
        # objects.list, not buckets.get: the nodes' roles/storage.objectAdmin grants storage.objects.list only.
        answer = session.get(f"{api}/storage/v1/b/{bucket}/o", params={"maxResults": "1", "fields": "kind"},
                             timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 -- token refresh, DNS, refused connections, timeouts: "cannot reach it"
        raise ConfigError(f"{where}: cannot reach Cloud Storage as {who} ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:160]}): check the network and credentials, {local}") from None
    if answer.status_code == 404:
        raise ConfigError(f"{where}: bucket {bucket} does not exist: check the name (`terraform -chdir=infra "
                          f"output bucket` names the deployment's), {local}")
    if answer.status_code in (401, 403):
        raise ConfigError(f"{where}: {who} may not use bucket {bucket} ({answer.status_code}): grant it "
                          f"roles/storage.objectAdmin on the bucket, {local}")
    if answer.status_code != 200:
        raise ConfigError(f"{where}: Cloud Storage answered {answer.status_code} for bucket {bucket}: try again, "
                          f"{local}")
