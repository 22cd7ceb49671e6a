"""What the agent keeps of a launch's program beyond its container: the newest line it printed, its own stats file
(RunSpec.stats_file) and its --sync folders in the bucket (sync.py), copied every sync_seconds while it runs, when
it ends and when it is stopped. One object per launch, so what was copied is remembered across its restarts."""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import tarfile
import threading
import time

from launch_contract import (
    LAST_LINE_CHARS,
    STEP_KEYS,
    RunSpec,
    sync_url,
)

from .metadata import MetadataError
from .storage import StorageError
from .sync import FolderSync, local_folder

STATS_TAIL = 64 * 1024  # bytes of a stats file read: its newest records (a JSON object file is read whole below it)
MAX_REPORTED_STATS = 8  # numbers of a program's own stats a report carries (a guest attribute stays small)


def record_numbers(record: dict) -> dict[str, float]:
    """A record's numbers, in its order: those one level deep named a/b."""
    numbers: dict[str, float] = {}
    for key, value in record.items():
        inner = value.items() if isinstance(value, dict) else [("", value)]
        for sub, number in inner:
            if isinstance(number, (int, float)) and not isinstance(number, bool):
                numbers[f"{key}/{sub}" if sub else str(key)] = number
    return numbers


def stats_figures(text: str, wanted=()) -> tuple[int | None, dict[str, float]]:
    """(step, numbers) of a program's own stats file: the whole text as one JSON object, else JSON lines read newest
    first. The step is the newest record's first of STEP_KEYS that holds a number; the numbers are the newest value
    of each ``wanted`` key (a trainer writes several kinds of record: its train figures stay shown while the newest
    line is an evaluation's), or without ``wanted`` the newest record's numbers (record_numbers). (None, {}) when
    nothing parses."""
    try:
        whole = json.loads(text)
        records = [whole] if isinstance(whole, dict) else []
    except ValueError:
        records = (_json_object(line) for line in reversed(text.splitlines()))
    step, numbers, newest = None, {}, True
    for record in records:
        if record is None:
            continue  # a line being written, the tail's first cut line, or not JSON
        found = record_numbers(record)
        if step is None:
            step = next((int(found[k]) for k in STEP_KEYS if k in found), None)
        if newest and not wanted:
            return step, found
        newest = False
        numbers.update({k: found[k] for k in wanted if k in found and k not in numbers})
        if step is not None and len(numbers) == len(wanted):
            break
    return step, {k: numbers[k] for k in wanted if k in numbers}


def _json_object(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


class RunOutputs:
    def __init__(self, spec: RunSpec, run_folder: str, docker, token, storage_url: str, log):
        self.spec, self.run_folder, self.docker, self.log = spec, run_folder, docker, log
        self.launch, self.container = spec.launch_id, spec.container
        self.workdir = None  # the image's WORKDIR (Docker.workdir), where the program runs: start_container sets it
        self.folders = [FolderSync(local_folder(run_folder, folder), sync_url(spec.run_dir, spec.node_rank, folder),
                                   token, storage_url) for folder in spec.sync] if spec.run_dir else []
        if spec.sync and not spec.run_dir:
            log(f"run {spec.run_id} has no run directory: its --sync folders stay on this node")
        self.lock = threading.Lock()  # one copy at a time: a restore, a copy on the timer, the final one
        self.pusher: threading.Thread | None = None
        self.next_push, self.was_running = 0.0, False
        self.copied_since_run = False  # a final copy took everything since the program last ran: another has nothing
        self.last_line, self.last_line_at = "", None
        self.stats_problem = ""  # why the --stats file gives no numbers, when it never will as it is
        self.live = False  # watch_live has seen output: it, not the followers' lagging whole lines, sets last_line
        self.followed_line = ""  # the newest whole line the follower copied (stdout and stderr)
        self.changed_at = 0.0  # monotonic: the newest line unlike the one before, or new stats (RunSpec.stall_minutes)

    # ---- the program's output ----
    def saw(self, line: str, live: bool = False) -> None:
        """A line the program printed (the output follower): the newest non-empty one is the report's last_line;
        once the live watch (watch_live) has seen output, the followers' whole lines, which lag it, no longer set it."""
        text = line.rstrip().rpartition("\r")[2].strip()  # a progress bar redraws its line: the last drawing
        if text and not live:
            self.followed_line = text[-LAST_LINE_CHARS:]  # the whole lines of both streams: the end's last word
        if self.live and not live:
            return
        if text:
            if text[-LAST_LINE_CHARS:] != self.last_line:  # the same line again and again is no progress
                self.changed_at = time.monotonic()
            self.last_line, self.last_line_at = text[-LAST_LINE_CHARS:], int(time.time())

    def watch_live(self, process) -> None:
        """The program's output as it is written (Docker.attach), for the report's last line alone: the newest text
        after a \r or \n, a line still being drawn included. The serial port keeps taking whole lines (copy_output)."""
        import codecs

        decoder, drawing = codecs.getincrementaldecoder("utf-8")(errors="replace"), ""
        for chunk in iter(lambda: process.stdout.read1(4096), b""):
            *ended, drawing = re.split(r"[\r\n]", drawing + decoder.decode(chunk))
            ended = [text.strip() for text in ended if text.strip()]
            newest = drawing.strip() or (ended[-1] if ended else "")  # the line being drawn, else the last one ended
            if newest:
                self.live = True
                self.saw(newest, live=True)
        process.wait()

    def progress(self) -> tuple[int | None, dict] | None:
        """(step, figures) of the program's own stats file (RunSpec.stats_file: stats_figures, the figures the launch
        names, else the first MAX_REPORTED_STATS numbers), or None when it names none or wrote none yet. The file is
        read on the host when it lies in a --sync folder, else copied out of the container (docker cp)."""
        name = self.spec.stats_file
        if not name:
            return None
        for folder in self.spec.sync:
            if name.startswith(folder + "/"):
                path = os.path.join(local_folder(self.run_folder, folder), name[len(folder) + 1:])
                text, is_folder = _tail(path), os.path.isdir(path)
                break
        else:
            if self.workdir is None:  # a container this agent adopted after a restart
                try:
                    self.workdir = self.docker.workdir(self.spec.image)
                except RuntimeError:
                    return None
            text, is_folder = _tar_member(self.docker.copy_out(self.container, posixpath.join(self.workdir, name)))
        newest = stats_figures(text) if text else (None, {})
        # what `gantry status` says instead of "no numbers yet", which a folder or a file of no JSON would be forever
        self.stats_problem = "is a folder, not a file" if is_folder else \
            "holds no JSON object (--stats reads a JSON object or JSON lines)" if text and newest == (None, {}) else ""
        if not text:
            return None
        wanted = [key for key, _ in self.spec.figures]
        if wanted:
            return stats_figures(text, wanted)
        return newest[0], dict(list(newest[1].items())[:MAX_REPORTED_STATS])

    # ---- the --sync folders ----
    def restore(self) -> None:
        """Put the bucket's copies back before the container starts. A bucket that cannot be read fails the start
        (StorageError, tried again after the backoff): a program started without its checkpoints would begin again
        and, at its first copy, overwrite the bucket's with its new ones."""
        for folder in self.spec.sync:  # mounted even when not copied: docker would make a missing one root's
            os.makedirs(local_folder(self.run_folder, folder), exist_ok=True)
        with self.lock:
            for folder in self.folders:
                written = folder.restore()
                if written:
                    self.log(f"restored {written} files from {folder.url} to {folder.local}")
        self.next_push = time.monotonic() + self.spec.sync_seconds

    def observe(self, status: str, now: float, follower: threading.Thread | None = None) -> None:
        """Each loop, with docker's status of the container: a copy every sync_seconds while it runs, and one when it
        has ended on its own (exit 0 or not). An ended container's output follower is let finish first, so its last
        line is in before the agent names it (`exited 127: sh: 1: pythn: not found`)."""
        if status != "running" and follower:
            follower.join(timeout=5)
        if status != "running" and self.live and self.followed_line:
            # ended: the live watch saw stdout alone (docker attach's stderr is the CLI's), and the follower's whole
            # lines of both streams are complete now, so an error printed last (a traceback, `selfplay: error: ...`)
            # is what the report names, not the stdout line before it
            self.live = False
            if self.followed_line != self.last_line:
                self.last_line, self.last_line_at = self.followed_line, int(time.time())
        if not self.folders:
            return
        if status == "running":
            self.was_running, self.copied_since_run = True, False
            if now >= self.next_push:
                self.push_soon(f"every {self.spec.sync_seconds} s")
        elif self.was_running:
            self.was_running = False
            self.push_soon("the program ended")

    def push_soon(self, why: str) -> None:
        """A copy in the background: a large checkpoint's upload must not hold up the loop (reports, a stop)."""
        if self.pusher and self.pusher.is_alive():
            return  # the copy under way takes what changed; the next turn takes the rest
        self.next_push = time.monotonic() + self.spec.sync_seconds
        self.pusher = threading.Thread(target=self.push, args=(why,), daemon=True)
        self.pusher.start()

    def push(self, why: str, deadline: float | None = None) -> bool:
        """Copy what changed in each folder; True when all of it was copied. A refusal is one line, and the folder is
        tried again at the next turn: a copy never ends the run."""
        wait = -1 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self.lock.acquire(timeout=wait):
            self.log(f"no {why} of the --sync folders: an earlier copy is still under way")
            return False
        complete = True
        try:
            for folder in self.folders:
                try:
                    copied, left = folder.push(deadline)
                except (StorageError, MetadataError, OSError) as exc:
                    self.log(f"could not copy {folder.local} to {folder.url} ({why}): {exc}; "
                             f"trying again in {self.spec.sync_seconds} s")
                    complete = False
                    continue
                complete = complete and not left
                if copied or left:
                    self.log(f"copied {copied} files from {folder.local} to {folder.url} ({why})"
                             + (f"; {left} not copied: out of time" if left else ""))
        finally:
            self.lock.release()
        return complete

    def final(self, deadline: float | None = None) -> None:
        """The copy after a stop: waits for a copy under way, then copies what changed since; at a shutdown (Spot
        preemption) only until ``deadline`` (monotonic)."""
        self.was_running = False
        if not self.folders or self.copied_since_run:  # a stop's copy, then the launch's end: nothing ran between
            return
        started = time.monotonic()
        if self.pusher:
            self.pusher.join(None if deadline is None else max(0.0, deadline - started))
        self.copied_since_run = self.push("final copy", deadline)
        self.log(f"final copy of the --sync folders done in {time.monotonic() - started:.1f} s")


def copy_output(process, serial_path: str, console, outputs: RunOutputs | None) -> None:
    """A container's output (`docker logs -f`) to the serial port (`gantry logs` reads it there), to the bucket's
    console log on a TPU VM, and to the outputs' last line, until the container ends."""
    with open(serial_path, "a", encoding="utf-8", errors="replace") if _writable(serial_path) \
            else open(os.devnull, "w") as serial:
        for line in process.stdout:
            serial.write(line)
            serial.flush()
            if console:
                console.write(line)
            if outputs:
                outputs.saw(line)
    process.wait()
    if console:
        console.flush()


def _writable(path: str) -> bool:
    try:
        with open(path, "a"):
            return True
    except OSError:
        return False


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as stats:
            stats.seek(0, os.SEEK_END)
            stats.seek(max(0, stats.tell() - STATS_TAIL))
            return stats.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _tar_member(archive: bytes | None) -> tuple[str, bool]:
    """(the end of the file (STATS_TAIL), whether PATH is a folder) from the tar archive `docker cp CONTAINER:PATH -`
    writes: its first member is PATH itself."""
    if not archive:
        return "", False
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            for member in tar:
                if member.isdir():
                    return "", True
                if member.isfile():
                    return tar.extractfile(member).read()[-STATS_TAIL:].decode("utf-8", "replace"), False
    except (tarfile.TarError, OSError):
        pass
    return "", False
