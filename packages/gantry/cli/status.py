"""gantry status (make status): a table of the nodes, what they run, and the latest figures."""

from __future__ import annotations

import time

from launch_contract import (
    KIND_KEY,
    POSITIONS_PER_S_KEY,
    STAGING_ENV,
    STATS_FILE,
    STEP_KEY,
    STEP_KEYS,
    TRAIN_KIND,
    State,
)

from gantry import config, cost, nodes, runs
from gantry.errors import GantryError
from gantry.status import ExitStatus

NAME = "status"
HELP = ("per-node state, run, step and heartbeat, the latest Pons error rates and arena Elo; restarts preempted "
        "Spot nodes of a started run (they bill again)")
DESCRIPTION = f"""\
One line per node: the VM's state, the agent's state
({", ".join(s.value for s in State)}),
how long it has been up since its last start and what that cost at list price (infra/terraform.tfvars,
as `make cost` prices it), the run, its learner step and how long ago the node last reported. Then the master's latest
training figures and what a million self-play positions cost at its pace (one rank a node, the default), the newest Pons evaluation (MCTS weak error rate per test set) and the newest
arena (Elo, random = 0, and W-D-L against each opponent; `make arena` or
eval.arena_every_minutes) from the run's stats.jsonl in the bucket. A command run (gantry run -- COMMAND) shows, per
node, the last line its program printed and when, the numbers of its own stats (--stats FILE), and the exit code and
last line of a node in error or restarting. Reads only: it changes nothing and works from any machine with
the deployment's infra/ state. One exception: a Spot node that Google stopped during a run (and
any node its agent powered off while a peer was gone) is started again, and bills again while it runs: the run
resumes from its newest checkpoint (a command starts again as given, its --sync folders back from the bucket);
status says so. `make stop` first, if you want it to stay off.

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
    they have (the report's figures: the first numbers of the newest record of --stats FILE)."""
    lines = []
    now = time.time() if now is None else now
    for s in statuses:
        report = s.report
        if report.last_line:
            at = _age(None if report.last_line_at is None else max(0.0, now - report.last_line_at))
            lines.append(f"node {s.node.rank}: last line ({at}): {report.last_line}")
        numbers = [f"{key} {_number(value)}" for key, value in report.figures.items()
                   if isinstance(value, (int, float)) and not (key in STEP_KEYS and value == report.step)]
        if report.step is not None or numbers:
            lines.append(f"node {s.node.rank}: " + " | ".join(
                ([f"step {report.step}"] if report.step is not None else []) + numbers))
        elif s.spec is not None and s.spec.stats_file and report.stats_problem:
            lines.append(f"node {s.node.rank}: --stats {s.spec.stats_file} {report.stats_problem}")
        elif s.spec is not None and s.spec.stats_file and report.state is State.RUNNING:
            lines.append(f"node {s.node.rank}: no numbers in {s.spec.stats_file} yet")
    return lines


def run(args, env) -> ExitStatus:
    cluster, api = nodes.connect(args.infra_dir, env.environ, env.stdout, env.stderr)
    statuses = [api.node_status(node) for node in cluster.nodes]
    if runs.restart_preempted(api, cluster, statuses, env.say, env.environ):
        statuses = [api.node_status(node) for node in cluster.nodes]
    hourly = node_hourly(args)
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
    if statuses[0].spec is not None and statuses[0].spec.command:
        for line in command_lines(statuses):
            env.say(line)
        runs.require_nodes(statuses)
        return ExitStatus.OK
    master = statuses[0].report
    if master.figures:
        env.say("master: " + runs.describe_figures(master.step, master.figures))
        if hourly is not None and POSITIONS_PER_S_KEY in master.figures:
            # measured on the node you rent, so C4 and N1 + T4 compare by what they cost per unit of work
            env.say("master: " + cost.describe_throughput_cost(hourly, master.figures[POSITIONS_PER_S_KEY]))
    own_program = statuses[0].spec is not None and statuses[0].spec.torchrun
    if master.run and own_program:  # Pons and the arena are the selfplay trainer's
        if master.step is None:
            env.say(f'master: no "{KIND_KEY}": "{TRAIN_KIND}" record with a "{STEP_KEY}" in the program\'s '
                    f"{STATS_FILE} under {STAGING_ENV} yet")
    elif master.run:
        pons = runs.latest_pons_errors(cluster.run_url(master.run, env.environ))
        if pons:
            step, errors = pons
            table = "  ".join(f"{name} {value:.1%}" for name, value in sorted(errors.items()))
            env.say(f"Pons MCTS weak errors at step {step}: {table}")
        else:
            env.say("Pons: no evaluation in stats.jsonl yet")
        arena = runs.latest_arena(cluster.run_url(master.run, env.environ))
        if arena:
            env.say(runs.describe_arena(*arena))
    runs.require_nodes(statuses)
    return ExitStatus.OK
