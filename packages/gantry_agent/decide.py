"""The decision: what to do about the run, from what the node observes. Pure: no clock, docker or network, so
tests/launcher/test_agent_decide.py drives it on a clock the test holds. Agent.reconcile observes, calls ``decide``
and carries the actions out; Agent.check_power_off asks ``power_off_due``."""

from __future__ import annotations

import dataclasses

from launch_contract import RunSpec, State


def backoff(crashes: int, restart_seconds: float) -> float:
    """Seconds before the next start after ``crashes`` failed ones in a row: doubling from restart_seconds, capped at
    5 minutes (a registry or peer that is down comes back on its own)."""
    return min(300.0, restart_seconds * 2 ** (crashes - 1))


@dataclasses.dataclass(frozen=True)
class Memory:
    """What the agent remembers between loops about the run it holds: Agent.m, which ``decide``, ``start_failed``,
    ``started`` and ``after_progress`` read and return."""

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
    last_line: str = ""  # the newest line the program printed (what a crash's report names)
    wall: float = 0.0  # epoch seconds: the launch's deadline (RunSpec.deadline) is on the launcher's clock
    quiet_s: float | None = None  # seconds since the running program last printed a new line or wrote new stats
    head_ended: bool = False  # a Ray launch's worker node: node 0's agent recorded this launch's end (ray_cluster)

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
class Ended:
    """The launch is over on this node (exit 0, its time limit, a stop): recorded here, so a restarted agent does not
    run it again, and in the bucket (launch_contract.EndRecord), so no verb starts the node for it again."""

    spec: RunSpec
    reason: str  # launch_contract.ENDED_REASONS
    detail: str


@dataclasses.dataclass(frozen=True)
class Log:
    message: str


def decide(m: Memory, o: Observation, restart_seconds: float, crash_loop_minutes: float) -> tuple[Memory, list]:
    """The next memory and the actions to take: start the spec's container when it is not running (after the
    backoff), stop it when the spec says stop, a new run replaces it or the launch's time limit has come, record an
    exit 0 or the limit as the launch's end, count a non-zero exit or a stall as a crash (and the start of a crash
    loop unless the container lived crash_loop_minutes)."""
    if o.halted:
        return m, []  # going down (or due to): starting a trainer now would only be killed
    spec, actions = o.spec, []
    if spec is None or spec.action == "stop":
        name = spec.container if spec else m.container
        if name and o.status(name)[0] == "running":
            actions.append(Stop(name, "the run spec says stop" if spec else "no run spec"))
            if spec is not None:
                actions.append(Ended(spec, "stopped", "gantry stop"))
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
    if spec.ray and spec.node_rank > 0 and o.head_ended:  # the cluster's program is over: its workers have no work
        why = "node 0's program ended, and with it the Ray cluster this node joined"
        stop = [Stop(name, why)] if status == "running" else []
        return m, [*actions, *stop, Ended(spec, "exited", why), Log(f"run {spec.run_id}: {why}"),
                   SetState(State.FINISHED, f"run {spec.run_id} finished on node 0")]
    if spec.deadline is not None and o.wall >= spec.deadline:  # never started again, whoever starts the node
        why = f"its time limit, {spec.max_minutes:g} min after the launch (gantry run --max-minutes)"
        stop = [Stop(name, f"time limit: {spec.max_minutes:g} min")] if status == "running" else []
        return m, [*actions, *stop, Ended(spec, "time-limit", why), Log(f"run {spec.run_id} reached {why}"),
                   SetState(State.FINISHED, f"run {spec.run_id} ended at {why}")]
    if status == "running":
        ray_worker = spec.ray and spec.node_rank > 0  # it only holds its part of the cluster: quiet by nature
        if spec.stall_minutes and not ray_worker and o.quiet_s is not None and o.quiet_s >= 60 * spec.stall_minutes:
            why = f"stalled: no new output line or stats for {o.quiet_s / 60:.0f} min (gantry run --stall-minutes)"
            m, restart = crashed(dataclasses.replace(m, seen_running=m.seen_running - {name}), o, restart_seconds,
                                 crash_loop_minutes, why, f"run {spec.run_id} stalled")
            return m, [*actions, Stop(name, why), *restart]
        m = dataclasses.replace(m, seen_running=m.seen_running | {name})
        return m, [*actions, Follow(name), SetState(State.RUNNING, "")]
    if status == "exited" and name in m.seen_running:
        m = dataclasses.replace(m, seen_running=m.seen_running - {name})
        if code == 0:
            return m, [*actions, Log(f"run {spec.run_id} finished (trainer exited 0)"),
                       Ended(spec, "exited", "exit 0"), SetState(State.FINISHED, f"run {spec.run_id} finished")]
        # `exited 127: sh: 1: pythn: not found`: what `gantry status` shows of a program that failed
        m, restart = crashed(m, o, restart_seconds, crash_loop_minutes,
                             f"exited {code}: {o.last_line}" if o.last_line else f"trainer exited with code {code}",
                             f"trainer exited with code {code}")
        actions += restart
    if o.now < m.next_start:
        return m, actions
    # Not running: never started, crashed, or left over from before a reboot or preemption.
    return m, [*actions, Start(spec)]


def crashed(m: Memory, o: Observation, restart_seconds: float, crash_loop_minutes: float,
            why: str, what: str) -> tuple[Memory, list]:
    """A non-zero exit or a stall: one more crash, the backoff before the next start, and a crash loop begun unless
    the container lived crash_loop_minutes."""
    crashes = m.crashes + 1
    delay = backoff(crashes, restart_seconds)
    m = dataclasses.replace(m, crashes=crashes, next_start=o.now + delay)
    if m.loop_since is None or o.now - m.started_at >= crash_loop_minutes * 60:
        m = dataclasses.replace(m, loop_since=o.now, loop_step=o.step)  # a container that lived that long: no loop
    return m, [Log(f"{what}; restart {crashes} in {delay:.0f} s"), SetState(State.RESTARTING, why)]


def start_failed(m: Memory, now: float, restart_seconds: float) -> tuple[Memory, float]:
    """A start that failed before the program ran (a pull, a restore, docker run): one more crash and its backoff;
    the memory and the seconds until the next try."""
    delay = backoff(m.crashes + 1, restart_seconds)
    return dataclasses.replace(m, crashes=m.crashes + 1, next_start=now + delay), delay


def started(m: Memory, container: str, now: float) -> Memory:
    """The container runs: its exit 0 from now on is the launch finishing, and a crash loop counts from now."""
    return dataclasses.replace(m, seen_running=m.seen_running | {container}, started_at=now)


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

