"""gantry stop (make stop): graceful stop of the run on every node, with a final checkpoint."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from launch_contract import DONE_STATES, SPOT_NOTICE_SECONDS, STOP_GRACE_SECONDS, State, sync_stop_grace

from gantry import config, nodes
from gantry.errors import GantryError
from gantry.status import ExitStatus

NAME = "stop"
HELP = ("stop the run on every node after a final checkpoint to the bucket (VMs keep running; a TPU VM is stopped "
        "too)")
DESCRIPTION = f"""\
Set action=stop in every node's run spec. Each agent sends the program SIGTERM (`docker stop`) and waits
{STOP_GRACE_SECONDS} s for it to exit (then SIGKILL; {sync_stop_grace()} s when the run has --sync folders, so that the grace
and their last copy fit in a Spot VM's {SPOT_NOTICE_SECONDS} s); the trainer writes a final checkpoint to the bucket in that
time and exits. Then the agent copies the run's --sync folders to the bucket a last time, and the node reports
stopped. `make run-gcp ARGS="--resume RUN_ID"` continues from that checkpoint. The VMs keep running
(and billing) until the agent's idle shutdown powers them off or `make destroy`. A Cloud TPU VM
bills until Cloud TPU stops it, so once its trainer stopped it is stopped too (nodes:stop; also
when no run is started): `make run-gcp` starts it again. --power-off stops the VMs too, once
the checkpoint is written: then only their disks bill. Asks first unless -y.

examples:
  gantry stop
  gantry stop -y --no-wait
  gantry stop -y --power-off         # and power the nodes off now
  make stop ARGS=-y
"""


def add_arguments(parser) -> None:
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--no-wait", action="store_true", help="return once the stop is requested")
    parser.add_argument("--power-off", action="store_true",
                        help="then power every node off now, rather than at the agents' idle shutdown: billing stops "
                             "but for the disks; `make run-gcp` starts them again")
    parser.add_argument("--timeout", type=float, default=180, help="seconds to wait for the nodes (default 180)")


def run(args, env) -> ExitStatus:
    if args.power_off and args.no_wait:  # powering off before the trainer wrote its checkpoint would lose it
        raise GantryError("--power-off waits for the final checkpoint, and --no-wait would not",
                          "Drop --no-wait (make stop ARGS=\"-y --power-off\").")
    cluster, api = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    specs = {node: api.read_spec(node) for node in cluster.nodes}
    active = {node: spec for node, spec in specs.items() if spec and spec.action == "start"}
    if not active:
        env.say("No run is started on any node; nothing to stop.")
        power_down(api, cluster, env)
        after_stop(api, cluster, args, env)
        return ExitStatus.OK
    run_ids = sorted({spec.run_id for spec in active.values()})
    env.confirm_or_refuse(f"Stop run {', '.join(run_ids)} on {len(active)} node(s) (a final checkpoint is kept)?",
                          yes=args.yes, verb="stop", nothing="nothing was stopped")
    for node, spec in active.items():
        api.write_spec(node, dataclasses.replace(spec, action="stop"))
        env.say(f"  node {node.rank} {node.name}: stop requested")
    if args.no_wait:
        if cluster.use_tpu:
            env.say("The TPU node keeps billing until it is stopped: `make stop` again without --no-wait stops it once "
                    "the trainer has stopped.")
        say_when_vms_power_off(cluster, args, env)
        return ExitStatus.OK
    deadline = time.monotonic() + args.timeout
    pending = dict(active)
    while pending and time.monotonic() < deadline:
        for node in list(pending):
            status = api.node_status(node)
            if not status.up or status.report.state in (*DONE_STATES, State.IDLE):
                step = status.report.step
                env.say(f"  node {node.rank} {node.name}: {status.state}" + (f" at step {step}" if step else ""))
                del pending[node]
        if pending:
            time.sleep(2)
    if pending:
        raise GantryError(f"{len(pending)} node(s) did not report stopped within {args.timeout:.0f} s",
                          "Check `make status` and `make logs`; the stop request stays in place.")
    power_down(api, cluster, env)
    env.say(f"Stopped run {', '.join(run_ids)}. Resume with `make run-gcp ARGS=\"--resume {run_ids[0]}\"`; "
            f"copy it here with `make fetch RUN={run_ids[0]}`.")
    after_stop(api, cluster, args, env)
    return ExitStatus.OK


def after_stop(api, cluster, args, env) -> None:
    """--power-off stops the nodes now; otherwise say when they stop billing by themselves."""
    if not args.power_off:
        say_when_vms_power_off(cluster, args, env)
        return
    for node in cluster.nodes:
        if api.power_off(node):
            env.say(f"  node {node.rank} {node.name}: powered off, billing only for its disk "
                    "(`make run-gcp` starts it again)")


def say_when_vms_power_off(cluster, args, env) -> None:
    """A stopped run leaves its VMs up and billing until their agents' idle shutdown: say when that is."""
    if cluster.use_tpu:  # power_down stopped the TPU node itself
        return
    idle = idle_shutdown_minutes(args.var_file, args.infra_dir)
    if idle is None:
        env.say("The nodes keep billing until their agents power them off (idle_shutdown_minutes after the run "
                "ends), or until `make destroy`.")
        return
    if not idle:
        env.say("The nodes keep billing: idle_shutdown_minutes = 0 never powers them off. `make destroy` ends it.")
        return
    at = time.strftime("%H:%M UTC", time.gmtime(time.time() + 60 * idle))
    env.say(f"The nodes keep billing until their agents power them off, {idle:g} min after the run ends "
            f"(idle_shutdown_minutes; about {at}), or until `make destroy`.")


def idle_shutdown_minutes(var_file, infra_dir=None) -> float | None:
    """The setting as Terraform reads the user's tfvars (their value, else infra's default; the nodes got it
    at apply); None when the file cannot be read now."""
    try:
        return float(config.load(Path(var_file), infra_dir).idle_shutdown_minutes)
    except (OSError, GantryError):
        return None


def power_down(api, cluster, env) -> None:
    """Stop the nodes that bill until their API stops them (a TPU VM: nodes:stop); a VM powers itself off idle."""
    for node in cluster.nodes:
        if api.power_down(node):
            env.say(f"  node {node.rank} {node.name}: TPU node stopped, no longer billing for the TPU "
                    "(`make run-gcp` starts it again)")
