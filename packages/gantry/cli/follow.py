"""Following a run from the laptop: node states from guest attributes, the master's output from its
serial port (a TPU VM: the log the agent keeps in the bucket). Shared by `gantry run` and `gantry logs
--follow`; Ctrl-C detaches, the run goes on. A Spot node preempted while it is followed is started again
(launches.restart_preempted), and the run resumes."""

from __future__ import annotations

import time

from launch_contract import DONE_STATES

from gantry import launches
from gantry.status import ExitStatus

REATTACH = ("Detached: the run keeps going on the nodes. Re-attach with `make status` or "
            "`make logs ARGS=--follow`; stop it with `make stop`.")


def end_of_output(api, node) -> int:
    """The output's current end, so that following shows what comes next."""
    offset = 0
    while True:
        text, after = api.output(node, offset)
        if not text or after == offset:
            return after
        offset = after


def follow(api, cluster, run_id: str, env, interval: float) -> ExitStatus:
    offset = end_of_output(api, cluster.master)
    seen: dict[int, tuple] = {}
    try:
        while True:
            statuses = [api.node_status(node) for node in cluster.nodes]
            launches.require_nodes(statuses)
            if launches.restart_preempted(api, cluster, statuses, env.say, env.environ):
                statuses = [api.node_status(node) for node in cluster.nodes]
            for status in statuses:
                key = (status.state, status.report.run, status.report.detail)
                if seen.get(status.node.rank) != key:
                    seen[status.node.rank] = key
                    detail = f" ({status.report.detail})" if status.report.detail else ""
                    env.say(f"[node {status.node.rank} {status.node.name}] {status.state}{detail}")
            text, offset = api.output(cluster.master, offset)
            for line in text.splitlines():
                env.say(f"[node 0] {line}")
            if all(s.report.run == run_id and s.report.state in DONE_STATES for s in statuses):
                states = ", ".join(sorted({s.state for s in statuses}))
                env.say(f"Run {run_id} {states} on every node. Copy it here with `make fetch RUN={run_id}`.")
                return ExitStatus.OK
            time.sleep(interval)
    except KeyboardInterrupt:
        env.say("", REATTACH)
        return ExitStatus.OK
