"""gantry status (make status): a table of the nodes, what they run, and the latest figures."""

from __future__ import annotations

import time

from launch_contract import STEP_KEYS, State

from gantry import config, cost, launches, nodes
from gantry.errors import GantryError
from gantry.launches import stats_reports
from gantry.local_world import LOCAL_ENV
from gantry.status import ExitStatus

NAME = "status"
HELP = ("per-node state, run, step and heartbeat, each node's last line and figures; restarts preempted "
        "Spot nodes of a started run (they bill again)")
DESCRIPTION = f"""\
One line per node: the VM's state, the agent's state
({", ".join(s.value for s in State)}),
how long it has been up since its last start and what that cost at list price (infra/terraform.tfvars,
as `make cost` prices it), the run, its step and how long ago the node last reported. Then, per node, the last line
its program printed and when, and the numbers of its stats (the --stats FILE its launch or gantry.yaml names):
those the launch's gantry.yaml names in figures, as it formats them, else the first ones; what a million units of
its pace cost on the node (gantry.yaml's pace); and the lines its reports name, from the newest record in the run's
stats that holds their keys (the kit's trainer: its evaluations and arena). Also the exit code and
last line of a node in error or restarting. Reads only: it changes nothing and works from any machine with
the deployment's infra/ state. One exception: a Spot node that Google stopped during a run (and
any node its agent powered off while a peer was gone) is started again, and bills again while it runs: its program
starts again as given, in the same run folder, its --sync folders back from the bucket (the kit's trainer resumes
from its newest checkpoint there); status says so. `make stop` first, if you want it to stay off.

examples:
  gantry status
  make status
"""


def add_arguments(parser) -> None:
    pass


def _age(seconds) -> str:
    if seconds is None:
        return "-"
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago"


def _uptime(seconds) -> str:
    if seconds is None:
        return "-"
    minutes = int(seconds // 60)  # whole minutes, as a clock shows them
    return f"{minutes}m" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def node_hourly(args) -> float | None:
    """One node's list price from infra/terraform.tfvars (as `make cost` prints it); None when it cannot be read."""
    try:
        return cost.estimate(config.load(args.var_file, args.infra_dir)).node_hourly
    except GantryError:
        return None


def _number(value) -> str:
    return f"{value:.0f}" if float(value).is_integer() and abs(value) < 1e12 else f"{value:.4g}"


def command_lines(statuses, now: float | None = None) -> list[str]:
    """A command run, node by node: the newest line it printed and when, then its own stats' numbers, whatever keys
    they have: as the launch's gantry.yaml formats them (RunSpec.figures), else KEY VALUE."""
    lines = []
    now = time.time() if now is None else now
    # "no numbers yet" only while no node has any: a program whose rank 0 alone writes stats (the kit's trainer on
    # several nodes) would otherwise say it of every other node for the whole run
    counted = any(s.report.step is not None or s.report.figures for s in statuses)
    for s in statuses:
        report = s.report
        if report.last_line:
            at = _age(None if report.last_line_at is None else max(0.0, now - report.last_line_at))
            lines.append(f"node {s.node.rank}: last line ({at}): {report.last_line}")
        formats = dict(s.spec.figures) if s.spec is not None else {}
        place = {key: n for n, key in enumerate(formats)}  # as the launch's gantry.yaml lists them, then the rest
        ordered = sorted(report.figures.items(), key=lambda item: place.get(item[0], len(place)))
        numbers = [formats[key].format(value) if key in formats else f"{key} {_number(value)}"
                   for key, value in ordered
                   if isinstance(value, (int, float)) and not (key in STEP_KEYS and value == report.step)]
        if report.step is not None or numbers:
            lines.append(f"node {s.node.rank}: " + " | ".join(
                ([f"step {report.step}"] if report.step is not None else []) + numbers))
        elif s.spec is not None and s.spec.stats_file and report.stats_problem:
            lines.append(f"node {s.node.rank}: --stats {s.spec.stats_file} {report.stats_problem}")
        elif s.spec is not None and s.spec.stats_file and report.state is State.RUNNING and not counted:
            lines.append(f"node {s.node.rank}: no numbers in {s.spec.stats_file} yet")
    return lines


def ray_line(size: dict, nodes_launched: int) -> str:
    """A Ray launch's cluster, as node 0's agent last read it from `ray status`."""
    if not size:
        return "ray: the cluster's size is not in yet (node 0's agent asks `ray status` once its head is up)"
    joined = ("" if size["nodes"] >= nodes_launched else
              f" of {nodes_launched} (the others are still joining, or restarting)")
    return (f"ray: {size['nodes']} node(s){joined}, {_number(size['CPU'])} CPUs and {_number(size['GPU'])} GPUs in "
            "the cluster the program's ray.init() joined")


def run(args, env) -> ExitStatus:
    cluster, api = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    statuses = [api.node_status(node) for node in cluster.nodes]
    if launches.restart_preempted(api, cluster, statuses, env.say, env.environ):
        statuses = [api.node_status(node) for node in cluster.nodes]
    hourly = 0.0 if LOCAL_ENV in env.environ else node_hourly(args)  # the local cloud's nodes bill nothing
    # UP and COST last: scripts (and the node twin) read the first columns by position
    env.say(f"{'NODE':<5} {'NAME':<24} {'STATE':<14} {'RUN':<24} {'STEP':>8}  {'HEARTBEAT':<10} {'UP':>6} {'COST':>7}")
    for s in statuses:
        step, up = s.report.step, s.uptime_s()
        spent = "-" if up is None or hourly is None else f"${hourly * up / 3600:.2f}"  # since its last start
        env.say(f"{s.node.rank:<5} {s.node.name:<24} {s.state:<14} {s.report.run or '-':<24} "
                f"{'-' if step is None else step:>8}  {_age(s.heartbeat_age_s()):<10} {_uptime(up):>6} {spent:>7}")
    for s in statuses:
        if s.report.detail:
            env.say(f"node {s.node.rank}: {s.report.detail}")
        elif s.boot.startswith("error"):
            env.say(f"node {s.node.rank} boot {s.boot}")
    for line in command_lines(statuses):
        env.say(line)
    spec, master = statuses[0].spec, statuses[0].report
    if spec is not None and spec.ray and master.run == spec.run_id:
        env.say(ray_line(master.ray, len(statuses)))
    if spec is not None and master.run == spec.run_id:
        pace = spec.show.get("pace")
        if pace and hourly and pace["key"] in master.figures:  # none for the local cloud, which bills nothing
            # measured on the node you rent, so C4 and N1 + T4 compare by what they cost per unit of work
            env.say("node 0: " + cost.describe_pace_cost(hourly, master.figures[pace["key"]], pace["unit"]))
        for line in stats_reports.report_lines(spec, cluster.run_url(spec.run_id, env.environ)):
            env.say(line)
    launches.require_nodes(statuses)
    return ExitStatus.OK
