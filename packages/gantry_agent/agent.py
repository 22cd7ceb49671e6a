"""The agent's loop: observe the node (metadata, docker, the run's stats.jsonl), decide (decide.py), act through the
adapters (containers, metadata, console_log, power), report. One class because the loop's memory is one thing: what
the agent started, since when it idles or crash-loops, what it last reported."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import threading
import time

from launch_contract import (
    ACTIVE_STATES,
    REPORT_KEY,
    Report,
    RunSpec,
    State,
    console_log_url,
)

from . import power, ray_cluster
from .console_log import ConsoleLog
from .containers import Docker, docker_run_args
from .decide import (
    Ended,
    Follow,
    Log,
    Memory,
    Observation,
    SetState,
    Start,
    Stop,
    after_progress,
    decide,
    power_off_due,
    start_failed,
    started,
)
from .ending import Endings
from .metadata import Metadata, MetadataError, TokenBucket
from .outputs import RunOutputs, copy_output
from .settings import CRASH_LOOP_ENV, MAX_RUN_HOURS_ENV, TPU_ENV_ATTRIBUTE, Settings
from .storage import StorageError


class Agent:
    def __init__(self, settings: Settings):
        self.s = settings
        self.metadata = Metadata(settings.metadata_url)
        self.docker = Docker(settings.docker)
        self.reports = TokenBucket(settings.reports_per_minute, settings.report_burst)
        self.etag = ""
        self.spec = None
        # What decide() reads and returns: the container held, its launch's crashes and back-off, the crash loop.
        self.m = Memory(started_at=time.monotonic())
        self.detail = ""  # the state's detail, as the report shows it
        self.step, self.figures = None, {}
        self.ray = ray_cluster.ClusterWatch()  # node 0 of a Ray launch: the cluster, as `ray status` last said
        self.idle_since = time.monotonic()
        self.powered_off = False
        self.published, self.published_at = None, 0.0
        self.follower = None
        self.outputs = None  # RunOutputs of the launch this agent holds: its last line, stats file, --sync folders
        self.on_tpu = False  # a Cloud TPU VM: its output also goes to the bucket, and it stops its node, not the host
        self.tpu_env = {}  # the tpu-env attribute's keys (parse_tpu_env): which node this is
        self.started = time.monotonic()  # the uptime's stand-in where the uptime file cannot be read
        self.out_of_time = False  # past max_run_hours on a TPU VM: no trainer starts again on this boot
        self.next_stop_try = 0.0  # after a failed power-off or node stop: when the next one may be tried
        self.console = None  # ConsoleLog of the current run on a TPU VM
        self.endings = Endings(settings.state_dir, self.metadata.token, settings.storage_url, self.log)

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
                    self.tpu_env = power.parse_tpu_env(attributes[TPU_ENV_ATTRIBUTE])
            except MetadataError as exc:
                failures += 1
                delay = min(60.0, 2.0 ** failures) * random.uniform(0.8, 1.2)
                self.log(f"metadata server: {exc}; retrying in {delay:.0f} s")
                self.reconcile()
                time.sleep(delay)
                continue
            self.reconcile()
            self.read_progress()
            self.endings.flush()  # an end the bucket did not take yet
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
        names = set() if halted else {n for n in (spec.container if spec else None, self.m.container) if n}
        statuses = {name: self.docker.status(name) for name in names}
        outputs = self.outputs if self.outputs and self.outputs.container in statuses else None
        if outputs:
            outputs.observe(statuses[outputs.container][0], time.monotonic(), self.follower)
        now = time.monotonic()
        finished = bool(spec and spec.action == "start" and spec.launch_id in self.endings.finished)
        observed = Observation(
            spec=spec, now=now, statuses=statuses, wall=time.time(), finished=finished,
            step=self.step, halted=halted, last_line=outputs.last_line if outputs else "",
            quiet_s=now - max(self.m.started_at, outputs.changed_at) if outputs else None,
            # a Ray worker's launch ends with node 0's: asked of the bucket while it is not over here
            head_ended=bool(spec and spec.ray and spec.node_rank > 0 and spec.action == "start" and spec.run_dir
                            and not finished and ray_cluster.head_ended(spec, self.metadata.token,
                                                                        self.s.storage_url)))
        self.m, actions = decide(self.m, observed, self.s.restart_seconds, self.s.crash_loop_minutes)
        for action in actions:
            self.act(action)

    def act(self, action) -> None:
        if isinstance(action, Stop):
            self.stop_container(action.container, action.why)
        elif isinstance(action, Start):
            self.start_container(action.spec)
        elif isinstance(action, Follow):
            self.ensure_follower(action.container)
        elif isinstance(action, SetState):
            self.set_state(action.state, action.detail)
        elif isinstance(action, Ended):  # after the last copy: whoever sees the end finds every output in the bucket
            if self.outputs and self.outputs.launch == action.spec.launch_id:
                self.outputs.final()
            self.endings.record(action.spec, action.reason, action.detail)
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
            if self.s.registry_host:  # the VM's service-account token, fresh for each pull (it lasts about an hour)
                self.docker.login(self.s.registry_host, self.metadata.token())
            self.docker.checked("pull", spec.image, timeout=1800)
            self.docker("rm", "-f", spec.container, timeout=60)
            outputs = self.outputs_for(spec)
            outputs.restore()  # the bucket's copy of the --sync folders, before the program looks for them
            self.docker.prepare_run_folder(self.run_folder(spec), spec.image)
            outputs.workdir = self.docker.workdir(spec.image)
            self.docker.checked(*docker_run_args(spec, self.run_folder(spec), self.s, outputs.workdir), timeout=300)
        except (RuntimeError, MetadataError, StorageError, OSError, subprocess.TimeoutExpired) as exc:
            self.m, delay = start_failed(self.m, time.monotonic(), self.s.restart_seconds)
            self.log(f"could not start run {spec.run_id}: {exc}; retrying in {delay:.0f} s")
            self.set_state(State.ERROR, str(exc)[:200])
            return
        self.log(f"started run {spec.run_id} as node {spec.node_rank}/{spec.nnodes} ({spec.image})")
        self.m = started(self.m, spec.container, time.monotonic())
        self.step, self.figures, self.ray = None, {}, ray_cluster.ClusterWatch()
        self.ensure_follower(spec.container, fresh=True)
        self.set_state(State.RUNNING, "")

    def outputs_for(self, spec: RunSpec) -> RunOutputs:
        if self.outputs is None or self.outputs.launch != spec.launch_id:
            self.outputs = RunOutputs(spec, self.run_folder(spec), self.docker, self.metadata.token,
                                      self.s.storage_url, self.log)
        return self.outputs

    def stop_container(self, name: str, why: str, shutdown: bool = False) -> None:
        """SIGTERM, the grace, then the final copy of the --sync folders (at a shutdown, within the Spot notice)."""
        outputs = self.outputs if self.outputs and self.outputs.container == name else None
        syncing = bool(outputs and outputs.folders)
        grace = self.s.stop_grace(syncing)
        self.log(f"stopping {name} ({why}): SIGTERM (the program checkpoints), up to {grace} s to exit"
                 + (", then the final copy of its --sync folders" if syncing else ""))
        self.set_state(State.STOPPING, why)
        self.publish()
        self.m = dataclasses.replace(self.m, seen_running=self.m.seen_running - {name})  # its exit 0 is ours
        begun = time.monotonic()
        self.docker("stop", "-t", str(grace), name, timeout=grace + 60)
        self.log(f"{name} stopped after {time.monotonic() - begun:.1f} s")
        if self.follower:
            self.follower.join(timeout=10)
        if outputs:
            outputs.final(time.monotonic() + self.s.sync_final_seconds if shutdown else None)

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
        if self.spec and self.spec.container == name:
            self.outputs_for(self.spec)  # a container this agent adopted (it restarted): watched as its own
        if self.follower and self.follower.is_alive() and not fresh:
            return
        self.follower = threading.Thread(target=self.follow_output, args=(name,), daemon=True)
        self.follower.start()
        if self.outputs and self.outputs.container == name:  # the last line as it is drawn, not as docker logs has it
            threading.Thread(target=self.outputs.watch_live, args=(self.docker.attach(name),), daemon=True).start()

    def follow_output(self, name: str) -> None:
        """Copy the container's output to the serial port (`gantry logs` reads it from there)."""
        copy_output(self.docker.follow(name), self.s.serial, self.console, self.outputs)

    def read_progress(self) -> None:
        """The step and figures the program wrote (RunOutputs.progress): progress ends a crash loop."""
        if self.spec is None or self.spec.action != "start":
            return
        outputs = self.outputs_for(self.spec)
        step, figures = outputs.progress() or (None, self.figures)
        if step not in (None, self.step) or figures != self.figures:
            outputs.changed_at = time.monotonic()  # new stats: the program is not stalled
        self.figures = figures
        if self.spec.ray and self.spec.node_rank == 0 and self.spec.container in self.m.seen_running:
            self.ray.read(self.docker, self.spec.container, self.spec.nnodes)
        if step is not None:
            self.step = step
            self.m = after_progress(self.m, self.step)

    # ---- state, reports, idling ----
    def set_state(self, state: State, detail: str) -> None:
        if (state, detail) != (self.m.state, self.detail):
            self.log(f"state {state}" + (f": {detail}" if detail else ""))
        self.m, self.detail = dataclasses.replace(self.m, state=state), detail
        if state in ACTIVE_STATES:
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = time.monotonic()

    def report(self) -> Report:
        spec, outputs = self.spec, self.outputs
        return Report(state=self.m.state, run=spec.run_id if spec else "", node_rank=spec.node_rank if spec else None,
                      step=self.step, figures=self.figures, detail=self.detail,
                      last_line=outputs.last_line if outputs else "",
                      last_line_at=outputs.last_line_at if outputs else None,
                      stats_problem=outputs.stats_problem if outputs else "",
                      ray=self.ray.size if spec and spec.ray else {})

    def publish(self, last_word: bool = False) -> None:
        """The report to the guest attribute, within GCE's rate limit (the token bucket); ``last_word`` (powering
        off) goes at once, outside it: one write more, and the node may never loop again to send it."""
        report = self.report()
        due = time.monotonic() - self.published_at >= self.s.heartbeat_seconds
        if report == self.published and not due:
            return
        if not self.reports.take() and not last_word:
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
                            loop_since=self.m.loop_since, crash_loop_minutes=self.s.crash_loop_minutes,
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
        if self.m.container and self.docker.running(self.m.container):
            self.stop_container(self.m.container, "crash loop: powering off" if why == "crash-loop"
                                else "max_run_hours: stopping the TPU node")
        if why == "crash-loop":
            self.power_off(f"trainer crash-looping for {seconds / 60:.1f} min without a new step, {self.m.crashes} "
                           f"restarts ({CRASH_LOOP_ENV}); on Spot `make status` starts the node again and the run "
                           f"resumes, else `make run-gcp ARGS=\"--resume {run}\"`")
        else:
            self.power_off(f"the node has been up {seconds / 3600:.2f} h, max_run_hours is {self.s.max_run_hours:g} "
                           f"({MAX_RUN_HOURS_ENV}); `make run-gcp ARGS=\"--resume {run}\"` starts it again and "
                           "resumes the run")

    def uptime(self) -> float:
        return power.uptime(self.s.uptime_file, self.started)

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
            self.powered_off = stopped = power.power_off_host(self.s.poweroff)
        if not stopped:
            self.next_stop_try = time.monotonic() + self.s.stop_retry_seconds
        return stopped

    def announce_stop(self, why: str) -> None:
        """Report powering-off at once (not at the next report's turn): it may be the node's last word."""
        self.set_state(State.POWERING_OFF, why)
        self.publish(last_word=True)

    def stop_tpu_node(self, why: str) -> bool:
        """nodes:stop of this TPU VM's own node; a failure is one line naming the fix, and the caller tries again."""
        try:
            node, operation = power.stop_tpu_node(self.s.tpu_url, self.metadata, self.tpu_env)
        except power.StopFailed as exc:
            line = (f"could not stop TPU node {exc.node or '(unknown)'}: {exc.cause}; `make stop` stops it meanwhile; "
                    f"retrying in {self.s.stop_retry_seconds:.0f} s")
            self.log(" ".join(line.split()))  # one line, whatever Google's message holds
            self.set_state(State.ERROR, f"could not stop the TPU node: {' '.join(exc.cause.split())}"[:200])
            return False
        self.announce_stop(why)
        self.log(f"stopping TPU node {node} (nodes:stop, operation {operation}): {why}")
        self.powered_off = True
        return True

    def shutdown(self) -> None:
        """SIGTERM (VM shutdown, Spot preemption, systemctl stop): checkpoint the run, then exit."""
        if self.m.container and self.docker.running(self.m.container):
            self.stop_container(self.m.container, "the agent is stopping (shutdown or preemption)", shutdown=True)
        elif self.outputs:  # ended on its own: the copy of its end may still be under way
            self.outputs.final(time.monotonic() + self.s.sync_final_seconds)
        self.log("agent stopped")
        if self.console:
            self.console.flush()


def parse_spec(raw, log) -> RunSpec | None:
    """The run spec from the attribute's text; None when absent or unusable (logged)."""
    if not raw:
        return None
    try:
        return RunSpec.from_json(raw)
    except ValueError as exc:
        log(f"ignoring an unusable run spec: {exc}")
        return None

