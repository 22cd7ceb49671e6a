"""The node agent's decision (gantry_agent.decide) on its own: observations in, memory and actions out, on a clock
the test holds. No process, docker or sleep: tests/launcher/test_agent.py runs the whole agent against fakes."""

from dataclasses import replace

from gantry_agent.decide import (
    Ended,
    Follow,
    Log,
    Memory,
    Observation,
    SetState,
    Start,
    Stop,
    after_progress,
    backoff,
    decide,
    power_off_due,
)
from launch_contract import RunSpec, State

RESTART_S, LOOP_MIN = 10.0, 30.0


def spec(run_id="r1", action="start", launched_at="t0") -> RunSpec:
    return RunSpec(run_id=run_id, image="repo/img@sha256:abc", node_rank=0, nnodes=1, master_addr="10.0.0.2",
                   action=action, launched_at=launched_at)


def step(memory, now, run=None, status=("missing", None), others=None, **observed):
    """One loop at ``now``: the spec's container in ``status``, any other containers in ``others``."""
    statuses = {**(others or {}), **({run.container: status} if run else {})}
    return decide(memory, Observation(spec=run, now=now, statuses=statuses, **observed), RESTART_S, LOOP_MIN)


def kinds(actions):
    return [type(a).__name__ for a in actions]


def test_an_idle_node_with_no_spec_does_nothing():
    memory, actions = step(Memory(), now=0.0)
    assert actions == [] and memory == Memory()


def test_a_new_spec_starts_its_container_and_a_running_one_is_followed():
    run = spec()
    memory, actions = step(Memory(), now=0.0, run=run)
    assert actions == [Start(run)] and memory.container == run.container and memory.launch == run.launch_id
    memory, actions = step(memory, now=5.0, run=run, status=("running", 0))
    assert actions == [Follow(run.container), SetState(State.RUNNING, "")]
    assert run.container in memory.seen_running


def test_an_exit_0_is_recorded_finished_and_never_started_again():
    run = spec()
    memory, _ = step(Memory(), now=0.0, run=run, status=("running", 0))
    memory, actions = step(memory, now=60.0, run=run, status=("exited", 0))
    assert actions == [Log("run r1 finished (trainer exited 0)"), Ended(run, "exited", "exit 0"),
                       SetState(State.FINISHED, "run r1 finished")]
    # the next loop (or a restarted agent, which reads finished-launches.json) leaves it alone
    _, actions = step(memory, now=61.0, run=run, status=("exited", 0), finished=True)
    assert actions == [SetState(State.FINISHED, "run r1 finished")]


def test_the_time_limit_stops_the_program_records_its_end_and_never_starts_it_again():
    run = replace(spec(launched_at="1000.0"), max_minutes=2.0)  # deadline 1120 on the launcher's clock
    memory, _ = step(Memory(), now=0.0, run=run, status=("running", 0), wall=1119.0)
    memory, actions = step(memory, now=1.0, run=run, status=("running", 0), wall=1120.0)
    why = "its time limit, 2 min after the launch (gantry run --max-minutes)"
    assert actions == [Stop(run.container, "time limit: 2 min"), Ended(run, "time-limit", why),
                       Log(f"run r1 reached {why}"), SetState(State.FINISHED, f"run r1 ended at {why}")]
    # a node started after the deadline (a Spot node someone started again) starts nothing
    _, actions = step(Memory(), now=0.0, run=run, status=("exited", 143), wall=5000.0)
    assert kinds(actions) == ["Ended", "Log", "SetState"]
    # no limit: the same clock starts it
    _, actions = step(Memory(), now=0.0, run=replace(run, max_minutes=0), wall=5000.0)
    assert kinds(actions) == ["Start"]


def test_a_stalled_program_is_stopped_and_restarted_as_a_crash():
    run = replace(spec(), stall_minutes=10.0)
    memory, _ = step(Memory(), now=0.0, run=run, status=("running", 0), quiet_s=0.0)
    memory, actions = step(memory, now=599.0, run=run, status=("running", 0), quiet_s=599.0)
    assert kinds(actions) == ["Follow", "SetState"]  # quiet, but not for 10 minutes yet
    memory, actions = step(memory, now=600.0, run=run, status=("running", 0), quiet_s=600.0)
    why = "stalled: no new output line or stats for 10 min (gantry run --stall-minutes)"
    assert actions == [Stop(run.container, why), Log("run r1 stalled; restart 1 in 10 s"),
                       SetState(State.RESTARTING, why)]
    assert memory.crashes == 1 and run.container not in memory.seen_running
    _, actions = step(memory, now=610.0, run=run, status=("exited", 143))  # its stop's exit is no second crash
    assert actions == [Start(run)]
    _, actions = step(memory, now=700.0, run=replace(run, stall_minutes=0), status=("running", 0), quiet_s=1e6)
    assert kinds(actions) == ["Follow", "SetState"]  # no stall limit: quiet forever is fine


def test_a_stop_records_the_end_of_the_launch():
    run = spec()
    memory, _ = step(Memory(), now=0.0, run=run, status=("running", 0))
    stopping = replace(run, action="stop")
    _, actions = step(memory, now=5.0, run=stopping, status=("running", 0))
    assert actions == [Stop(run.container, "the run spec says stop"), Ended(stopping, "stopped", "gantry stop"),
                       SetState(State.STOPPED, "run r1 stopped")]


def test_a_crash_is_restarted_after_a_backoff_that_doubles_and_is_capped():
    run = spec()
    memory, _ = step(Memory(), now=0.0, run=run, status=("running", 0))
    memory, actions = step(memory, now=100.0, run=run, status=("exited", 1))
    assert kinds(actions) == ["Log", "SetState"] and actions[1] == SetState(State.RESTARTING, "trainer exited with code 1")
    assert memory.crashes == 1 and memory.next_start == 100.0 + RESTART_S
    _, actions = step(memory, now=109.9, run=run, status=("exited", 1))
    assert actions == []  # still backing off: an exited container not seen running again is no second crash
    memory, actions = step(memory, now=110.0, run=run, status=("exited", 1))
    assert actions == [Start(run)]
    memory, _ = step(memory, now=111.0, run=run, status=("running", 0))
    memory, _ = step(memory, now=112.0, run=run, status=("exited", 1))
    assert memory.crashes == 2 and memory.next_start == 112.0 + 2 * RESTART_S
    assert [backoff(n, RESTART_S) for n in (1, 2, 3, 6, 20)] == [10.0, 20.0, 40.0, 300.0, 300.0]


def test_a_new_launch_of_the_same_run_resets_the_crash_count():
    run = spec()
    memory = Memory(container=run.container, launch=run.launch_id, crashes=4, next_start=1e9, loop_since=5.0)
    again = spec(launched_at="t1")
    memory, actions = step(memory, now=10.0, run=again)
    assert actions == [Start(again)] and (memory.crashes, memory.next_start, memory.loop_since) == (0, 0.0, None)


def test_a_crash_loop_starts_at_the_first_crash_and_survives_quick_restarts():
    run = spec()
    memory, _ = step(Memory(started_at=0.0), now=0.0, run=run, status=("running", 0))
    memory, _ = step(memory, now=20.0, run=run, status=("exited", 1), step=7)
    assert (memory.loop_since, memory.loop_step) == (20.0, 7)
    memory = replace(memory, seen_running=memory.seen_running | {run.container}, started_at=40.0)  # restarted
    memory, _ = step(memory, now=50.0, run=run, status=("exited", 1), step=7)
    assert memory.loop_since == 20.0  # lived 10 s: the same loop
    # a container that lived crash_loop_minutes was no loop: the count starts again from its exit
    memory = replace(memory, seen_running=memory.seen_running | {run.container}, started_at=60.0)
    later = 60.0 + LOOP_MIN * 60
    memory, _ = step(memory, now=later, run=run, status=("exited", 1), step=9)
    assert (memory.loop_since, memory.loop_step) == (later, 9)


def test_a_stop_spec_stops_a_running_container_then_reports_stopped():
    run = spec(action="stop")
    memory = Memory(state=State.RUNNING, container=run.container, loop_since=3.0)
    memory, actions = step(memory, now=1.0, run=run, status=("running", 0))
    assert actions == [Stop(run.container, "the run spec says stop"), Ended(run, "stopped", "gantry stop"),
                       SetState(State.STOPPED, "run r1 stopped")]
    assert memory.loop_since is None
    _, actions = step(memory, now=2.0, run=run, status=("exited", 0))
    assert actions == [SetState(State.STOPPED, "run r1 stopped")]


def test_a_spec_that_disappears_stops_the_held_container_and_goes_idle():
    held = spec().container
    memory, actions = step(Memory(state=State.RUNNING, container=held), now=1.0, others={held: ("running", 0)})
    assert actions == [Stop(held, "no run spec"), SetState(State.IDLE, "")]
    _, actions = step(Memory(state=State.POWERING_OFF, container=held), now=1.0, others={held: ("exited", 0)})
    assert actions == []  # powering off is not undone by a missing spec


def test_a_new_run_replaces_the_running_one():
    old, new = spec("r1"), spec("r2")
    memory = Memory(state=State.RUNNING, container=old.container, launch=old.launch_id)
    memory, actions = step(memory, now=1.0, run=new, others={old.container: ("running", 0)})
    assert actions == [Stop(old.container, "a new run r2 replaces it"), Start(new)]
    assert memory.container == new.container


def test_a_halted_node_starts_nothing():
    assert step(Memory(), now=0.0, run=spec(), halted=True) == (Memory(), [])


def due(now, idle_since=None, loop_since=None, uptime_s=None, idle_minutes=0.0, crash_loop_minutes=LOOP_MIN,
        max_run_hours=0.0):
    return power_off_due(now, idle_since=idle_since, idle_minutes=idle_minutes, loop_since=loop_since,
                         crash_loop_minutes=crash_loop_minutes, uptime_s=uptime_s, max_run_hours=max_run_hours)


def test_an_idle_node_powers_off_after_idle_minutes_and_a_running_one_never():
    assert due(now=179.0, idle_since=0.0, idle_minutes=3) is None
    assert due(now=180.0, idle_since=0.0, idle_minutes=3) == ("idle", 180.0)
    assert due(now=1e6, idle_since=None, idle_minutes=3) is None  # a run holds the node: idle_since is None
    assert due(now=1e6, idle_since=0.0, idle_minutes=0) is None  # 0 = never


def test_a_crash_loop_powers_off_after_its_limit_unless_a_new_step_ended_it():
    looping = Memory(loop_since=100.0, loop_step=3)
    assert due(now=100.0 + LOOP_MIN * 60 - 1, loop_since=looping.loop_since) is None
    assert due(now=100.0 + LOOP_MIN * 60, loop_since=looping.loop_since) == ("crash-loop", LOOP_MIN * 60)
    # the restarted trainer shows a step past the one it crashed at: progress, so the loop is over and nothing is due
    trained_on = after_progress(looping, step=4)
    assert trained_on.loop_since is None and due(now=1e6, loop_since=trained_on.loop_since) is None
    assert after_progress(looping, step=3) == looping  # the same step again: still looping
    assert due(now=1e6, loop_since=0.0, crash_loop_minutes=0) is None  # 0 = never


def test_max_run_hours_is_enforced_only_where_the_uptime_is_given_a_tpu_vm():
    assert due(now=0.0, uptime_s=2 * 3600 - 1, max_run_hours=2) is None
    assert due(now=0.0, uptime_s=2 * 3600, max_run_hours=2) == ("max-run", 7200)
    assert due(now=0.0, uptime_s=None, max_run_hours=2) is None  # a VM: GCE's max_run_duration enforces it
    assert due(now=0.0, uptime_s=1e9, max_run_hours=0) is None


def test_a_failed_start_backs_off_and_a_start_counts_the_crash_loop_from_now():
    """The changes a start makes are decide's too: the agent only carries the memory they return."""
    from gantry_agent.decide import start_failed, started

    memory, delay = start_failed(Memory(crashes=2), now=100.0, restart_seconds=10.0)
    assert (memory.crashes, delay, memory.next_start) == (3, 40.0, 140.0)
    memory = started(memory, "gantry-run", now=150.0)
    assert memory.seen_running == frozenset({"gantry-run"}) and memory.started_at == 150.0 and memory.crashes == 3
