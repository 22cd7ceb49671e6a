"""The Gantry node agent: runs the trainer container that the launcher describes in instance metadata.

Stdlib only: it runs on the VM's system Python, shipped through metadata key `gantry-agent` and
started by systemd (gantry-agent.service, see infra/modules/startup_script). No SSH, no public IP:

    launcher --setMetadata gantry-run--> metadata server <--wait_for_change-- agent --docker run--> trainer
    launcher <--getGuestAttributes-- gantry/agent <--PUT (a few a minute)-- agent
    launcher <--getSerialPortOutput (port 2)-- /dev/ttyS1 <-- trainer output, agent events
    launcher <--fsspec-- gs://BUCKET/runs/RUN_ID/logs/node-N.log <--upload (every few s)-- the same (TPU VMs)

On a Cloud TPU VM the launcher reaches the node through the Cloud TPU API, which has metadata and guest
attributes but no serial port: there the agent also keeps the run's output in the run's bucket folder
(ConsoleLog). Powering a TPU VM's host off does not stop the node's billing, and Cloud TPU has no run-duration
limit, so there the agent stops its own node through the Cloud TPU API (nodes:stop, the VM's token) where a VM
powers off, and also once the node has been up GANTRY_MAX_RUN_HOURS (max_run_hours, which GCE enforces on a VM):

    agent --POST v2/projects/P/locations/ZONE/nodes/NODE:stop--> tpu.googleapis.com    (P, ZONE, NODE: tpu-env)

The run spec (JSON in attribute gantry-run), the container's environment, the stats.jsonl it reads and the report
it writes are the launch contract (launch_contract.py), which ships beside this file as metadata key
gantry-contract: stdlib only, like this file, since both run on the VM's system Python.

The agent starts the container when a launch says start, restarts it after a crash or a reboot (the
trainer resumes from the bucket's newest checkpoint), stops it gracefully (`docker stop -t 25`: the
trainer checkpoints on SIGTERM), leaves a run that exited 0 on its own alone, and powers the VM off (stops
the TPU node) after GANTRY_IDLE_SHUTDOWN_MINUTES without a run or GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES of
crash-looping; on a TPU VM up for GANTRY_MAX_RUN_HOURS it stops the trainer the same graceful way, then the node.
A stop that fails (no permission, no network) is logged in one line naming the fix and tried again later.
Everything it talks to can be swapped for tests: GANTRY_METADATA_URL, GANTRY_AGENT_DOCKER (a command
line), GANTRY_AGENT_POWEROFF, GANTRY_AGENT_SERIAL, GANTRY_AGENT_STORAGE_URL, GANTRY_AGENT_TPU_URL,
GANTRY_AGENT_UPTIME_FILE.

Why one file of ~900 lines: it ships as one metadata value and runs as one script on the VM's system Python (the
contract it shares is the second value, launch_contract.py). Read it in its sections: settings; the metadata,
console-log and token-bucket adapters; the decision (``decide``, ``power_off_due``, ``after_progress``: pure, tested
on a fake clock in tests/launcher/test_agent_decide.py); ``Agent``, which observes, decides and acts with docker,
the metadata server, power-off and the Cloud TPU API; ``main``.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

# Beside this file on the VM (the startup script writes metadata key gantry-contract there), installed elsewhere.
from launch_contract import (
    ACTIVE_STATES,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    NAMESPACE,
    NNODES_ENV,
    NODE_RANK_ENV,
    NPROC_PER_NODE_ENV,
    PJRT_DEVICE_ENV,
    REPORT_KEY,
    REPORTED_FIGURES,
    RUN_DIR_ENV,
    RUN_KEY,
    STAGING,
    STAGING_ENV,
    STEP_KEY,
    Report,
    RunSpec,
    State,
    console_log_url,
    newest_record,
)

# A trainer that keeps exiting non-zero without a new training step for this long powers its node off. The usual
# cause is a preempted Spot peer: the other nodes fail at the rendezvous and restart until someone restarts the
# peer, billing all the while. 30 min is well past what a peer needs to come back on its own or by `make run-gcp`
# (boot, about 2 min; pulling a multi-GB CUDA image, up to about 10) and still cuts an unattended preemption's bill
# from max_run_hours to half an hour. A stopped node keeps its disk; `make status` / `make run-gcp` start it again.
CRASH_LOOP_ENV = "GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES"
CRASH_LOOP_SHUTDOWN_MINUTES = 30.0  # 0 = never
# Cloud TPU puts this instance attribute on its VMs (torch_xla reads the TPU's topology from it): how the agent
# knows it runs on a TPU VM before any TPU run spec arrives.
TPU_ENV_ATTRIBUTE = "tpu-env"
# Its lines are `KEY: 'value'`; these name the node the agent stops (nodes:stop). Google does not document tpu-env;
# the key names are what Google's own MaxText reads on TPU VMs (github.com/AI-Hypercomputer/maxtext,
# multihost_job.py, get_env_command_str: `grep '^NODE_ID' /tmp/tpu-env | cut -d "'" -f 2`, likewise ZONE and
# CONSUMER_PROJECT_ID). The project and zone fall back to the metadata server's standard project/project-id and
# instance/zone; the node's name has no other source (a TPU VM's instance name is t1v-n-...-w-0, not the node's).
TPU_PROJECT_KEY, TPU_ZONE_KEY, TPU_NODE_KEY = "CONSUMER_PROJECT_ID", "ZONE", "NODE_ID"
# max_run_hours (infra/variables.tf) reaches the agent in /etc/gantry/agent.env under this name, rendered by
# infra/modules/startup_script as idle_shutdown_minutes is. GCE enforces it on a VM (max_run_duration); on a TPU VM
# (google_tpu_v2_vm has no run-duration setting) the agent does: the node's uptime, so each start has the full budget.
MAX_RUN_HOURS_ENV = "GANTRY_MAX_RUN_HOURS"
# What the node's service account needs to stop its own TPU node (infra/iam.tf grants these when use_tpu).
TPU_STOP_PERMISSION = "tpu.nodes.stop"


class Settings:
    """Everything from the environment (/etc/gantry/agent.env on a VM), read once."""

    def __init__(self, environ=os.environ):
        def get(name, default):
            return environ.get(name) or default
        self.metadata_url = get("GANTRY_METADATA_URL", "http://metadata.google.internal/computeMetadata/v1")
        self.run_key = get("GANTRY_RUN_METADATA_KEY", RUN_KEY)
        self.namespace = get("GANTRY_GUEST_ATTRIBUTES_NAMESPACE", NAMESPACE)
        self.registry_host = get("GANTRY_REGISTRY_HOST", "")
        self.idle_minutes = float(get("GANTRY_IDLE_SHUTDOWN_MINUTES", "0"))  # 0 = never power off
        self.crash_loop_minutes = float(get(CRASH_LOOP_ENV, str(CRASH_LOOP_SHUTDOWN_MINUTES)))  # 0 = never
        self.max_run_hours = float(get(MAX_RUN_HOURS_ENV, "0"))  # enforced on a TPU VM only; 0 = no limit
        # Seconds since boot (the node's uptime for max_run_hours); tests: a file they write.
        self.uptime_file = get("GANTRY_AGENT_UPTIME_FILE", "/proc/uptime")
        # The Cloud TPU API, where a TPU VM's agent stops its own node; tests: a fake.
        self.tpu_url = get("GANTRY_AGENT_TPU_URL", "https://tpu.googleapis.com").rstrip("/")
        # How soon a power-off or TPU node stop that failed is tried again (a missing role, no network).
        self.stop_retry_seconds = float(get("GANTRY_AGENT_STOP_RETRY_SECONDS", "300"))
        self.log_file = get("GANTRY_AGENT_LOG_FILE", "")
        self.docker = shlex.split(get("GANTRY_AGENT_DOCKER", "docker"))
        self.poweroff = shlex.split(get("GANTRY_AGENT_POWEROFF", "systemctl poweroff"))
        self.serial = get("GANTRY_AGENT_SERIAL", "/dev/ttyS1")  # serial port 2: getSerialPortOutput(port=2)
        self.state_dir = get("GANTRY_AGENT_STATE_DIR", "/var/lib/gantry")
        self.runs_dir = get("GANTRY_AGENT_RUNS_DIR", os.path.join(self.state_dir, "runs"))
        # Cloud Storage's JSON API, where a TPU VM's agent uploads the run's output (ConsoleLog); tests: a fake.
        self.storage_url = get("GANTRY_AGENT_STORAGE_URL", "https://storage.googleapis.com").rstrip("/")
        self.console_upload_seconds = float(get("GANTRY_AGENT_CONSOLE_UPLOAD_SECONDS", "5"))
        self.shm_size = get("GANTRY_AGENT_SHM_SIZE", "4g")  # actors share weights through /dev/shm
        # Site-specific `docker run` flags (a mount, --cpus): the node twin mounts its local bucket with it.
        self.extra_run_args = shlex.split(get("GANTRY_AGENT_DOCKER_RUN_ARGS", ""))
        # How long one wait_for_change request hangs: also how soon a crashed trainer is noticed.
        self.watch_seconds = float(get("GANTRY_AGENT_WATCH_SECONDS", "30"))
        self.stop_grace_seconds = int(get("GANTRY_AGENT_STOP_GRACE_SECONDS", "25"))  # Spot gives ~30 s
        self.restart_seconds = float(get("GANTRY_AGENT_RESTART_SECONDS", "10"))  # first crash-restart delay
        self.heartbeat_seconds = float(get("GANTRY_AGENT_HEARTBEAT_SECONDS", "60"))
        # Guest attributes are rate limited by GCE: a token bucket keeps writes to a few a minute.
        self.reports_per_minute = float(get("GANTRY_AGENT_REPORTS_PER_MINUTE", "4"))
        self.report_burst = int(get("GANTRY_AGENT_REPORT_BURST", "2"))


class TokenBucket:
    """At most ``burst`` writes at once and ``per_minute`` on average."""

    def __init__(self, per_minute: float, burst: int, clock=time.monotonic):
        self.rate, self.capacity, self.clock = per_minute / 60.0, float(burst), clock
        self.tokens, self.updated = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


class MetadataError(Exception):
    pass


class Metadata:
    """The GCE metadata server (or a fake at GANTRY_METADATA_URL)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def _request(self, path, method="GET", data=None, timeout=10.0):
        request = urllib.request.Request(f"{self.url}/{path}", data=data, method=method,
                                         headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.read().decode(), response.headers.get("ETag", "")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise MetadataError(f"{method} {path}: {exc}") from exc

    def wait_attributes(self, etag: str, timeout_s: float):
        """All instance attributes, once they differ from ``etag`` or ``timeout_s`` has passed.

        The directory is watched rather than the run key: waiting on a key that does not exist
        yet answers 404 at once, which would turn the wait into a busy loop.
        """
        # Without an ETag, wait_for_change waits for the next change: the first read must not wait.
        query = "?recursive=true"
        if etag:
            query += f"&wait_for_change=true&timeout_sec={max(1, int(timeout_s))}&last_etag={etag}"
        body, new_etag = self._request(f"instance/attributes/{query}", timeout=timeout_s + 10)
        return json.loads(body or "{}"), new_etag

    def token(self) -> str:
        body, _ = self._request("instance/service-accounts/default/token")
        return json.loads(body)["access_token"]

    def get(self, path: str) -> str:
        return self._request(path)[0].strip()

    def put_guest_attribute(self, namespace: str, key: str, value: str) -> None:
        self._request(f"instance/guest-attributes/{namespace}/{key}", method="PUT", data=value.encode())


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
            except (OSError, ValueError, MetadataError) as exc:  # urllib's errors are OSErrors
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
        scheme, _, rest = self.url.partition("://")
        if scheme == "file":  # a local bucket (tests, the node twin)
            path = urllib.parse.unquote(rest)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "wb") as out:
                out.write(data)
            os.replace(path + ".tmp", path)
            return
        if scheme != "gs":
            raise ValueError(f"cannot upload to {self.url} (gs:// or file://)")
        # The JSON API's simple upload (objects.insert, cloud.google.com/storage/docs/json_api/v1/objects/insert): POST
        # /upload/storage/v1/b/BUCKET/o?uploadType=media&name=OBJECT with the VM's token; the node's service
        # account holds objectAdmin on the runs bucket (infra/iam.tf), which overwriting the object needs.
        bucket, _, name = rest.partition("/")
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        request = urllib.request.Request(
            f"{self.storage_url}/upload/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?{query}", data=data,
            method="POST", headers={"Authorization": f"Bearer {self.token()}",
                                    "Content-Type": "text/plain; charset=utf-8"})
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()


class Docker:
    """The docker CLI on the node (GANTRY_AGENT_DOCKER, a command line: tests put fake_docker there)."""

    def __init__(self, command: list[str]):
        self.command = command

    def __call__(self, *args, input_text=None, timeout=120) -> subprocess.CompletedProcess:
        return subprocess.run([*self.command, *args], input=input_text, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def checked(self, *args, timeout=120) -> None:
        """Run it; RuntimeError with the end of docker's own message when it fails."""
        result = self(*args, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"docker {args[0]} failed: {(result.stderr or result.stdout).strip()[-300:]}")

    def status(self, name: str) -> tuple[str, int | None]:
        """(running | exited | created | ..., its exit code), or ("missing", None) when there is no such container."""
        result = self("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name, timeout=30)
        if result.returncode != 0:
            return "missing", None
        status, _, code = result.stdout.strip().partition(" ")
        return status, int(code or 0)

    def running(self, name: str) -> bool:
        return self.status(name)[0] == "running"

    def follow(self, name: str) -> subprocess.Popen:
        """`docker logs -f`: the container's output so far, then as it comes, until it ends."""
        return subprocess.Popen([*self.command, "logs", "-f", name], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")


# ---- the decision: what to do about the run, from what the node observes (pure: no clock, docker or network) --------
def backoff(crashes: int, restart_seconds: float) -> float:
    """Seconds before the next start after ``crashes`` failed ones in a row: doubling from restart_seconds, capped at
    5 minutes (a registry or peer that is down comes back on its own)."""
    return min(300.0, restart_seconds * 2 ** (crashes - 1))


@dataclasses.dataclass(frozen=True)
class Memory:
    """What the agent remembers between loops about the run it holds (Agent.memory / Agent.remember)."""

    state: State = State.IDLE
    container: str | None = None  # the container this agent started or adopted
    launch: str = ""  # the launch (RunSpec.launch_id) the counters below belong to
    crashes: int = 0  # failed starts and non-zero exits of this launch in a row
    next_start: float = 0.0  # monotonic seconds before which nothing is started (backoff)
    seen_running: frozenset = frozenset()  # containers seen running by this process: their exit 0 means "finished"
    # Crash loop: since when the trainer has exited non-zero with no new training step (None: not looping), the step
    # at that moment, and when the current container started.
    loop_since: float | None = None
    loop_step: int | None = None
    started_at: float = 0.0


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the node looks like on one loop: the spec, the clock, docker's view of the containers involved."""

    spec: RunSpec | None
    now: float  # monotonic seconds
    statuses: dict  # container name -> (docker status: running | exited | missing | ..., exit code or None)
    finished: bool = False  # the spec's launch already finished on this node (finished-launches.json)
    step: int | None = None  # the run's newest training step
    halted: bool = False  # powered off or past max_run_hours: nothing may start

    def status(self, name: str | None) -> tuple:
        return self.statuses.get(name, ("missing", None)) if name else ("missing", None)


# The actions ``decide`` asks for, carried out in order by Agent.act.
@dataclasses.dataclass(frozen=True)
class Stop:
    container: str
    why: str


@dataclasses.dataclass(frozen=True)
class Start:
    spec: RunSpec


@dataclasses.dataclass(frozen=True)
class Follow:
    container: str  # copy its output to the serial port (and the bucket on a TPU VM), unless already copying


@dataclasses.dataclass(frozen=True)
class SetState:
    state: State
    detail: str


@dataclasses.dataclass(frozen=True)
class Finished:
    spec: RunSpec  # its launch exited 0: recorded, so a restarted agent does not run it again


@dataclasses.dataclass(frozen=True)
class Log:
    message: str


def decide(m: Memory, o: Observation, restart_seconds: float, crash_loop_minutes: float) -> tuple[Memory, list]:
    """The next memory and the actions to take: start the spec's container when it is not running (after the
    backoff), stop it when the spec says stop or a new run replaces it, record an exit 0 as finished, count a
    non-zero exit as a crash (and the start of a crash loop unless the container lived crash_loop_minutes)."""
    if o.halted:
        return m, []  # going down (or due to): starting a trainer now would only be killed
    spec, actions = o.spec, []
    if spec is None or spec.action == "stop":
        name = spec.container if spec else m.container
        if name and o.status(name)[0] == "running":
            actions.append(Stop(name, "the run spec says stop" if spec else "no run spec"))
        if spec is not None:
            actions.append(SetState(State.STOPPED, f"run {spec.run_id} stopped"))
        elif m.state not in (State.IDLE, State.POWERING_OFF):
            actions.append(SetState(State.IDLE, ""))
        return dataclasses.replace(m, loop_since=None), actions
    name = spec.container
    if m.container and m.container != name and o.status(m.container)[0] == "running":
        actions.append(Stop(m.container, f"a new run {spec.run_id} replaces it"))
    m = dataclasses.replace(m, container=name)
    if spec.launch_id != m.launch:
        m = dataclasses.replace(m, launch=spec.launch_id, crashes=0, next_start=0.0, loop_since=None)
    if o.finished:
        return m, [*actions, SetState(State.FINISHED, f"run {spec.run_id} finished")]
    status, code = o.status(name)
    if status == "running":
        m = dataclasses.replace(m, seen_running=m.seen_running | {name})
        return m, [*actions, Follow(name), SetState(State.RUNNING, "")]
    if status == "exited" and name in m.seen_running:
        m = dataclasses.replace(m, seen_running=m.seen_running - {name})
        if code == 0:
            return m, [*actions, Log(f"run {spec.run_id} finished (trainer exited 0)"), Finished(spec),
                       SetState(State.FINISHED, f"run {spec.run_id} finished")]
        crashes = m.crashes + 1
        delay = backoff(crashes, restart_seconds)
        m = dataclasses.replace(m, crashes=crashes, next_start=o.now + delay)
        if m.loop_since is None or o.now - m.started_at >= crash_loop_minutes * 60:
            m = dataclasses.replace(m, loop_since=o.now, loop_step=o.step)  # a container that lived that long: no loop
        actions += [Log(f"trainer exited with code {code}; restart {crashes} in {delay:.0f} s"),
                    SetState(State.RESTARTING, f"trainer exited with code {code}")]
    if o.now < m.next_start:
        return m, actions
    # Not running: never started, crashed, or left over from before a reboot or preemption.
    return m, [*actions, Start(spec)]


def power_off_due(now: float, *, idle_since: float | None, idle_minutes: float, loop_since: float | None,
                  crash_loop_minutes: float, uptime_s: float | None, max_run_hours: float) -> tuple[str, float] | None:
    """Whether this node should stop billing now, and why: ("idle", seconds without a run), ("crash-loop", seconds
    crash-looping without a new step) or ("max-run", seconds up, on a TPU VM only: uptime_s is None elsewhere).
    A limit of 0 is never; the first due wins."""
    if idle_minutes > 0 and idle_since is not None and now - idle_since >= idle_minutes * 60:
        return "idle", now - idle_since
    if crash_loop_minutes > 0 and loop_since is not None and now - loop_since >= crash_loop_minutes * 60:
        return "crash-loop", now - loop_since
    if max_run_hours > 0 and uptime_s is not None and uptime_s >= max_run_hours * 3600:
        return "max-run", uptime_s
    return None


def after_progress(m: Memory, step: int | None) -> Memory:
    """A new training step since the crash that began a crash loop is progress: the loop is over."""
    if m.loop_since is not None and step != m.loop_step:
        return dataclasses.replace(m, loop_since=None)
    return m


class Agent:
    def __init__(self, settings: Settings):
        self.s = settings
        self.metadata = Metadata(settings.metadata_url)
        self.docker = Docker(settings.docker)
        self.reports = TokenBucket(settings.reports_per_minute, settings.report_burst)
        self.etag = ""
        self.spec = None
        self.state, self.detail = State.IDLE, ""
        self.step, self.figures = None, {}
        self.container = None  # name of the container this agent started or adopted
        self.seen_running = set()  # containers seen running by this process: their exit 0 means "finished"
        self.launch, self.crashes, self.next_start = "", 0, 0.0
        self.idle_since = time.monotonic()
        # Crash loop: since when the trainer has exited non-zero with no new training step (None: not looping),
        # the step at that moment, and when the current container started.
        self.loop_since, self.loop_step, self.started_at = None, None, time.monotonic()
        self.powered_off = False
        self.published, self.published_at = None, 0.0
        self.follower = None
        self.on_tpu = False  # a Cloud TPU VM: its output also goes to the bucket, and it stops its node, not the host
        self.tpu_env = {}  # the tpu-env attribute's keys (parse_tpu_env): which node this is
        self.started = time.monotonic()  # the uptime's stand-in where the uptime file cannot be read
        self.out_of_time = False  # past max_run_hours on a TPU VM: no trainer starts again on this boot
        self.next_stop_try = 0.0  # after a failed power-off or node stop: when the next one may be tried
        self.console = None  # ConsoleLog of the current run on a TPU VM
        self.finished_file = os.path.join(settings.state_dir, "finished-launches.json")

    # ---- output ----
    def log(self, message: str) -> None:
        line = f"gantry-agent: {message}"
        print(line, flush=True)
        for path in (self.s.log_file, self.s.serial):
            self._append(path, line)
        if self.console:
            self.console.write(line + "\n")

    def _append(self, path: str, line: str) -> None:
        if not path:
            return
        try:
            with open(path, "a", encoding="utf-8", errors="replace") as out:
                out.write(line + "\n")
        except OSError:
            pass  # a missing serial port must not stop the run

    # ---- the main loop ----
    def run_forever(self) -> None:
        self.log(f"watching metadata key {self.s.run_key} at {self.s.metadata_url}")
        failures = 0
        while True:
            started = time.monotonic()
            previous = self.etag
            try:
                attributes, self.etag = self.metadata.wait_attributes(self.etag, self.s.watch_seconds)
                failures = 0
                self.spec = parse_spec(attributes.get(self.s.run_key), self.log)
                self.on_tpu = self.on_tpu or TPU_ENV_ATTRIBUTE in attributes or bool(self.spec and self.spec.tpu)
                if TPU_ENV_ATTRIBUTE in attributes:
                    self.tpu_env = parse_tpu_env(attributes[TPU_ENV_ATTRIBUTE])
            except MetadataError as exc:
                failures += 1
                delay = min(60.0, 2.0 ** failures) * random.uniform(0.8, 1.2)
                self.log(f"metadata server: {exc}; retrying in {delay:.0f} s")
                self.reconcile()
                time.sleep(delay)
                continue
            self.reconcile()
            self.read_progress()
            self.publish()
            if self.console:
                self.console.flush()
            if time.monotonic() >= self.next_stop_try:
                self.check_power_off()
            # A server that answers at once with nothing new (a proxy, a bug) must not become a busy loop.
            if self.etag == previous and time.monotonic() - started < 1.0:
                time.sleep(1.0)

    def reconcile(self) -> None:
        """Observe, decide (``decide``), act."""
        spec, halted = self.spec, self.powered_off or self.out_of_time
        names = set() if halted else {n for n in (spec.container if spec else None, self.container) if n}
        observed = Observation(
            spec=spec, now=time.monotonic(), statuses={name: self.docker.status(name) for name in names},
            finished=bool(spec and spec.action == "start" and spec.launch_id in self.load_finished()),
            step=self.step, halted=halted)
        memory, actions = decide(self.memory(), observed, self.s.restart_seconds, self.s.crash_loop_minutes)
        self.remember(memory)
        for action in actions:
            self.act(action)

    def memory(self) -> Memory:
        return Memory(self.state, self.container, self.launch, self.crashes, self.next_start,
                      frozenset(self.seen_running), self.loop_since, self.loop_step, self.started_at)

    def remember(self, m: Memory) -> None:
        self.container, self.launch, self.crashes, self.next_start = m.container, m.launch, m.crashes, m.next_start
        self.seen_running = set(m.seen_running)
        self.loop_since, self.loop_step, self.started_at = m.loop_since, m.loop_step, m.started_at

    def act(self, action) -> None:
        if isinstance(action, Stop):
            self.stop_container(action.container, action.why)
        elif isinstance(action, Start):
            self.start_container(action.spec)
        elif isinstance(action, Follow):
            self.ensure_follower(action.container)
        elif isinstance(action, SetState):
            self.set_state(action.state, action.detail)
        elif isinstance(action, Finished):
            self.save_finished(action.spec.launch_id)
        elif isinstance(action, Log):
            self.log(action.message)
        else:
            raise TypeError(f"no such action: {action!r}")

    # ---- the container ----
    def run_folder(self, spec: RunSpec) -> str:
        """The host folder mounted at /runs: one per run, so its stats.jsonl is this run's."""
        return os.path.join(self.s.runs_dir, spec.run_id)

    def start_container(self, spec: RunSpec) -> None:
        self.open_console(spec)
        self.set_state(State.PULLING, spec.image)
        self.publish()
        try:
            self.login()
            self.docker.checked("pull", spec.image, timeout=1800)
            self.docker("rm", "-f", spec.container, timeout=60)
            self.prepare_run_folder(spec)
            self.docker.checked(*docker_run_args(spec, self.run_folder(spec), self.s), timeout=300)
        except (RuntimeError, MetadataError, OSError, subprocess.TimeoutExpired) as exc:
            self.crashes += 1
            delay = backoff(self.crashes, self.s.restart_seconds)
            self.next_start = time.monotonic() + delay
            self.log(f"could not start run {spec.run_id}: {exc}; retrying in {delay:.0f} s")
            self.set_state(State.ERROR, str(exc)[:200])
            return
        self.log(f"started run {spec.run_id} as node {spec.node_rank}/{spec.nnodes} ({spec.image})")
        self.seen_running.add(spec.container)
        self.started_at = time.monotonic()
        self.step, self.figures = None, {}
        self.ensure_follower(spec.container, fresh=True)
        self.set_state(State.RUNNING, "")

    def prepare_run_folder(self, spec: RunSpec) -> None:
        """Make the run folder writable for the image's user: the agent is root, the trainer is not.

        The image declares its user (Dockerfile USER 1000:1000): a numeric one gets the folder; a named
        one (unknown on this host) gets a folder anyone may write, as on a single-tenant VM."""
        folder = self.run_folder(spec)
        os.makedirs(folder, exist_ok=True)
        user = self.docker("image", "inspect", "--format", "{{.Config.User}}", spec.image, timeout=60).stdout.strip()
        uid, _, gid = user.partition(":")
        if not user or uid in ("0", "root"):
            return
        if uid.isdigit() and (not gid or gid.isdigit()):
            for root, dirs, files in os.walk(folder):  # a folder left by an earlier launch may hold root's files
                for path in [root, *(os.path.join(root, n) for n in dirs + files)]:
                    os.chown(path, int(uid), int(gid or uid))
        else:
            os.chmod(folder, 0o1777)

    def login(self) -> None:
        """The VM's service-account token, fresh for each pull (it lasts about an hour)."""
        if not self.s.registry_host:
            return
        token = self.metadata.token()
        result = self.docker("login", "-u", "oauth2accesstoken", "--password-stdin",
                             f"https://{self.s.registry_host}", input_text=token, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"docker login to {self.s.registry_host} refused the node's token "
                               "(the node service account needs roles/artifactregistry.reader)")

    def stop_container(self, name: str, why: str) -> None:
        self.log(f"stopping {name} ({why}); the trainer checkpoints on SIGTERM")
        self.set_state(State.STOPPING, why)
        self.publish()
        self.seen_running.discard(name)  # its exit 0 is ours, not the run finishing
        self.docker("stop", "-t", str(self.s.stop_grace_seconds), name, timeout=self.s.stop_grace_seconds + 60)
        if self.follower:
            self.follower.join(timeout=10)

    def open_console(self, spec: RunSpec | None) -> None:
        """On a TPU VM, the run's output goes to the bucket too (ConsoleLog): the launcher has no serial port there.
        The local copy lives under the state folder, so a resumed run continues its log."""
        if spec is None or not (spec.tpu or self.on_tpu) or not spec.run_dir:
            return
        url = console_log_url(spec.run_dir, spec.node_rank)
        if self.console is None or self.console.url != url:
            local = os.path.join(self.s.state_dir, "console", f"{spec.run_id}-{spec.node_rank}.log")
            self.console = ConsoleLog(url, local, self.metadata.token, self.s.storage_url,
                                      self.s.console_upload_seconds)

    def ensure_follower(self, name: str, fresh: bool = False) -> None:
        self.open_console(self.spec)
        if self.follower and self.follower.is_alive() and not fresh:
            return
        self.follower = threading.Thread(target=self.follow_output, args=(name,), daemon=True)
        self.follower.start()

    def follow_output(self, name: str) -> None:
        """Copy the container's output to the serial port (`gantry logs` reads it from there)."""
        process = self.docker.follow(name)
        console = self.console
        with open(self.s.serial, "a", encoding="utf-8", errors="replace") if _writable(self.s.serial) \
                else open(os.devnull, "w") as serial:
            for line in process.stdout:
                serial.write(line)
                serial.flush()
                if console:
                    console.write(line)
        process.wait()
        if console:
            console.flush()

    def read_progress(self) -> None:
        """The step and headline figures from the newest record of the run's stats.jsonl (rank 0's node)."""
        if self.spec is None or self.spec.action != "start":
            return
        record = newest_record(self.run_folder(self.spec))
        if record is not None:
            self.step = int(record[STEP_KEY])
            self.remember(after_progress(self.memory(), self.step))
            self.figures = {key: record[key] for key in REPORTED_FIGURES if isinstance(record.get(key), (int, float))}

    # ---- state, reports, idling ----
    def set_state(self, state: State, detail: str) -> None:
        if (state, detail) != (self.state, self.detail):
            self.log(f"state {state}" + (f": {detail}" if detail else ""))
        self.state, self.detail = state, detail
        if state in ACTIVE_STATES:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = time.monotonic()

    def report(self) -> Report:
        spec = self.spec
        return Report(state=self.state, run=spec.run_id if spec else "", node_rank=spec.node_rank if spec else None,
                      step=self.step, figures=self.figures, detail=self.detail)

    def publish(self) -> None:
        report = self.report()
        due = time.monotonic() - self.published_at >= self.s.heartbeat_seconds
        if report == self.published and not due:
            return
        if not self.reports.take():
            return  # the next loop tries again: the newest report wins, none queue up
        try:
            self.metadata.put_guest_attribute(self.s.namespace, REPORT_KEY,
                                              dataclasses.replace(report, heartbeat=int(time.time())).to_json())
            self.published, self.published_at = report, time.monotonic()
        except MetadataError as exc:
            self.log(f"could not write guest attribute {self.s.namespace}/{REPORT_KEY}: {exc}")

    def check_power_off(self) -> None:
        """Stop billing for a node without a run for idle_minutes, crash-looping for crash_loop_minutes (a Spot peer
        preempted: the run spec stays, starting the node resumes the run), or, on a TPU VM, up for max_run_hours
        (GCE enforces that itself on a VM; Cloud TPU has no such limit): the trainer first checkpoints (SIGTERM)."""
        if self.powered_off:
            return
        tpu_limit = self.on_tpu and self.s.max_run_hours > 0
        due = power_off_due(time.monotonic(), idle_since=self.idle_since, idle_minutes=self.s.idle_minutes,
                            loop_since=self.loop_since, crash_loop_minutes=self.s.crash_loop_minutes,
                            uptime_s=self.uptime() if tpu_limit else None, max_run_hours=self.s.max_run_hours)
        if due is None:
            return
        why, seconds = due
        run = self.spec.run_id if self.spec else "RUN_ID"
        if why == "idle":
            self.power_off(f"no run for {seconds / 60:.1f} min (idle_shutdown_minutes)")
            return
        if why == "max-run":
            self.out_of_time = True  # reconcile starts nothing more on this boot; a nodes:start boots afresh
        if self.container and self.docker.running(self.container):
            self.stop_container(self.container, "crash loop: powering off" if why == "crash-loop"
                                else "max_run_hours: stopping the TPU node")
        if why == "crash-loop":
            self.power_off(f"trainer crash-looping for {seconds / 60:.1f} min without a new step, {self.crashes} "
                           f"restarts ({CRASH_LOOP_ENV}); on Spot `make status` starts the node again and the run "
                           f"resumes, else `make run-gcp ARGS=\"--resume {run}\"`")
        else:
            self.power_off(f"the node has been up {seconds / 3600:.2f} h, max_run_hours is {self.s.max_run_hours:g} "
                           f"({MAX_RUN_HOURS_ENV}); `make run-gcp ARGS=\"--resume {run}\"` starts it again and "
                           "resumes the run")

    def uptime(self) -> float:
        """Seconds since the host booted: a stopped TPU node started again gets its whole max_run_hours anew, and a
        restarted agent does not reset the count."""
        try:
            with open(self.s.uptime_file, encoding="ascii") as f:
                return float(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return time.monotonic() - self.started

    def power_off(self, why: str) -> bool:
        """Stop billing for this node: power the VM off, or stop a TPU VM's node. A failure is tried again
        stop_retry_seconds later, whichever check (idle, crash loop, max_run_hours) asked for it."""
        if self.on_tpu:
            # Cloud TPU bills a node until nodes:stop or a delete; powering its host off is neither, and would only
            # cut the launcher off from a node that may still bill. So the node stops itself, as `make stop` would.
            stopped = self.stop_tpu_node(why)
        else:
            self.announce_stop(why)
            self.log(f"powering off: {' '.join(self.s.poweroff)}")
            self.powered_off = stopped = subprocess.run(self.s.poweroff, check=False).returncode == 0
        if not stopped:
            self.next_stop_try = time.monotonic() + self.s.stop_retry_seconds
        return stopped

    def announce_stop(self, why: str) -> None:
        """Report powering-off at once (not at the next report's turn): it may be the node's last word."""
        self.set_state(State.POWERING_OFF, why)
        self.published_at = 0.0
        self.publish()

    def stop_tpu_node(self, why: str) -> bool:
        """nodes:stop of this TPU VM's own node with the VM's token. The Operation it answers is not waited for:
        Cloud TPU shuts this host down. Any failure is one line naming the fix; the caller tries again later."""
        node = ""
        try:
            node = self.tpu_node()
            request = urllib.request.Request(
                f"{self.s.tpu_url}/v2/{node}:stop", data=b"{}", method="POST",
                headers={"Authorization": f"Bearer {self.metadata.token()}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as response:
                operation = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:  # before OSError, which it is
            status, message = google_error(exc)
            fix = (f"the node service account needs {TPU_STOP_PERMISSION} (infra/iam.tf grants it when use_tpu: "
                   "`make apply`)" if exc.code == 403 else "the Cloud TPU API refused it")
            self.self_stop_failed(node, f"HTTP {exc.code} {status}: {message}; {fix}")
            return False
        except (MetadataError, OSError, ValueError, http.client.HTTPException) as exc:  # a half answer is no crash
            self.self_stop_failed(node, str(exc) or type(exc).__name__)
            return False
        self.announce_stop(why)
        self.log(f"stopping TPU node {node} (nodes:stop, operation {operation.get('name', '?')}): {why}")
        self.powered_off = True
        return True

    def self_stop_failed(self, node: str, cause: str) -> None:
        line = (f"could not stop TPU node {node or '(unknown)'}: {cause}; `make stop` stops it meanwhile; "
                f"retrying in {self.s.stop_retry_seconds:.0f} s")
        self.log(" ".join(line.split()))  # one line, whatever Google's message holds
        self.set_state(State.ERROR, f"could not stop the TPU node: {' '.join(cause.split())}"[:200])

    def tpu_node(self) -> str:
        """projects/P/locations/ZONE/nodes/NODE of this TPU VM, from tpu-env, else the metadata server's project and
        zone (the node's name is in tpu-env only)."""
        env = self.tpu_env
        if not env.get(TPU_NODE_KEY):
            raise ValueError(f"the {TPU_ENV_ATTRIBUTE} attribute names no {TPU_NODE_KEY}")
        project = env.get(TPU_PROJECT_KEY) or self.metadata.get("project/project-id")
        zone = (env.get(TPU_ZONE_KEY) or self.metadata.get("instance/zone")).rsplit("/", 1)[-1]  # projects/N/zones/Z
        return f"projects/{project}/locations/{zone}/nodes/{env[TPU_NODE_KEY]}"

    def shutdown(self) -> None:
        """SIGTERM (VM shutdown, Spot preemption, systemctl stop): checkpoint the run, then exit."""
        if self.container and self.docker.running(self.container):
            self.stop_container(self.container, "the agent is stopping (shutdown or preemption)")
        self.log("agent stopped")
        if self.console:
            self.console.flush()

    def load_finished(self) -> set:
        try:
            with open(self.finished_file, encoding="utf-8") as f:
                return set(json.load(f))
        except (OSError, ValueError):
            return set()

    def save_finished(self, launch: str) -> None:
        finished = sorted(self.load_finished() | {launch})[-100:]
        try:
            os.makedirs(self.s.state_dir, exist_ok=True)
            with open(self.finished_file + ".tmp", "w", encoding="utf-8") as f:
                json.dump(finished, f)
            os.replace(self.finished_file + ".tmp", self.finished_file)
        except OSError as exc:
            self.log(f"could not record the finished run in {self.finished_file}: {exc}")


def parse_tpu_env(text: str) -> dict:
    """tpu-env's `KEY: 'value'` lines (TPU_ENV_ATTRIBUTE) as a dict of unquoted values."""
    values = {}
    for line in str(text).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            values[key.strip()] = value.strip().strip("'\"")
    return values


def google_error(exc: urllib.error.HTTPError) -> tuple[str, str]:
    """The status and message of Google's JSON error body ({"error": {"code", "message", "status"}}), else the
    HTTP reason."""
    try:
        error = json.loads(exc.read() or b"{}").get("error") or {}
        return str(error.get("status") or exc.reason), str(error.get("message") or exc.reason)
    except (OSError, ValueError, AttributeError, http.client.HTTPException):
        return str(exc.reason), str(exc.reason)


def parse_spec(raw, log) -> RunSpec | None:
    """The run spec from the attribute's text; None when absent or unusable (logged)."""
    if not raw:
        return None
    try:
        return RunSpec.from_json(raw)
    except ValueError as exc:
        log(f"ignoring an unusable run spec: {exc}")
        return None


# A TPU VM's container. The chips are /dev/accel* (v2-v4) or VFIO groups under /dev/vfio (v5e and later), and libtpu
# pins its buffers, so it needs an unlimited memlock. --privileged (what Google's "Run TPU workloads in a Docker
# container" guide uses) passes every host device, but grants capabilities to a root process only: the image's
# USER 1000 would get neither CAP_IPC_LOCK nor access to root-owned device nodes. So the container runs as root
# (the agent, root too, owns the run folder) with memlock unlimited, as Google's guide runs it (its images are root).
# Not yet run on a real TPU (docs/ARCHITECTURE.md).
TPU_RUN_ARGS = ["--privileged", "--user", "0:0", "--ulimit", "memlock=-1:-1"]


def docker_run_args(spec: RunSpec, run_folder: str, s: Settings) -> list[str]:
    env = {NNODES_ENV: spec.nnodes, NODE_RANK_ENV: spec.node_rank, MASTER_ADDR_ENV: spec.master_addr,
           MASTER_PORT_ENV: spec.master_port,
           STAGING_ENV: STAGING}  # the bucket mirror's local copy survives container restarts
    if spec.nproc_per_node:
        env[NPROC_PER_NODE_ENV] = spec.nproc_per_node
    if spec.run_dir:
        env[RUN_DIR_ENV] = spec.run_dir
    args = ["run", "-d", "--name", spec.container, "--network", "host", "--shm-size", s.shm_size,
            "--label", f"gantry-run={spec.run_id}", "-v", f"{run_folder}:/runs", *s.extra_run_args]
    if spec.gpu:
        args += ["--gpus", "all"]
    if spec.tpu:
        args += TPU_RUN_ARGS
        env[PJRT_DEVICE_ENV] = "TPU"
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    if spec.torchrun:  # whatever the image's entry point is: the rendezvous is the agent's to wire
        return [*args, "--entrypoint", "torchrun", spec.image, *torchrun_args(spec)]
    return [*args, spec.image, *spec.args]


def torchrun_args(spec: RunSpec) -> list[str]:
    """torchrun's static rendezvous at node 0, from the same fields as the environment, then the program.
    Ranks per node: the launch's --nproc-per-node, else one per GPU on a GPU node, else one."""
    nproc = spec.nproc_per_node or ("gpu" if spec.gpu else 1)
    return [f"--nnodes={spec.nnodes}", f"--node-rank={spec.node_rank}", f"--master-addr={spec.master_addr}",
            f"--master-port={spec.master_port}", f"--nproc-per-node={nproc}", *spec.args]


def _writable(path: str) -> bool:
    try:
        with open(path, "a"):
            return True
    except OSError:
        return False


class _Stopping(Exception):
    pass


def main() -> int:
    agent = Agent(Settings())

    def on_signal(signum, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one graceful stop, not two
        raise _Stopping()

    signal.signal(signal.SIGTERM, on_signal)
    try:
        agent.run_forever()
    except (_Stopping, KeyboardInterrupt):
        agent.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
