"""``python -m selfplay {train,launch,check,eval,arena,plot}``: the trainer's command line.

    python -m selfplay train --config connect4 --run.dir=runs/c4 --search.simulations=100
    NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.2 python -m selfplay launch --config connect4
    python -m selfplay check --config connect4 --search.simulations=100   # what gantry run asks first
    python -m selfplay eval --checkpoint runs/c4 --positions 1000
    python -m selfplay arena --checkpoint runs/c4 --games 100 --baselines random,greedy,minimax5,mcts1000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from launch_contract import (
    DEFAULT_CONFIG,
    DEFAULT_MASTER_PORT,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    NNODES_ENV,
    NODE_RANK_ENV,
    NPROC_PER_NODE_ENV,
)

CONFIG_DIR = Path(__file__).parent / "configs"
DEFAULT_BASELINES = "random,greedy,minimax5,mcts1000"  # AlphaZero.jl's Connect Four baselines (see players.py)


def resolve_config(name_or_path: str) -> Path:
    """A YAML path, or the name of a packaged config (connect4, tictactoe)."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    packaged = CONFIG_DIR / f"{name_or_path}.yaml"
    if packaged.is_file():
        return packaged
    names = ", ".join(sorted(q.stem for q in CONFIG_DIR.glob("*.yaml")))
    from .config import ConfigError
    raise ConfigError(f"config {name_or_path!r} is neither a file nor a packaged config: choose one of {names} "
                      f"or pass a path to a YAML file")


def _load(args, overrides):
    from .config import load
    return load(resolve_config(args.config), overrides)


def cmd_check(args, overrides) -> int:
    """The config and flags as `train` would take them, refused the same way, with nothing written or imported
    beyond the config: what `gantry run` asks before it starts or writes to a node."""
    cfg = _load(args, overrides)
    print(f"config ok: {args.config} ({cfg.game.name})", flush=True)
    return 0


def cmd_train(args, overrides) -> int:
    cfg = _load(args, overrides)
    if os.environ.get("RANK", "0") == "0":  # the first line: a misspelt CONFIG=/RUN_DIR= shows here, once per run
        print(f"config {resolve_config(args.config)} ({cfg.game.name}), run dir {cfg.run.dir}", flush=True)
    from .train import train
    train(cfg)
    return 0


def _env_int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        value = minimum - 1
    if value < minimum:
        from .config import ConfigError
        raise ConfigError(f"{name}={raw!r} must be an integer >= {minimum}: fix the environment variable")
    return value


def cmd_launch(args, overrides) -> int:
    """One entry for one node or many: torchrun with a static rendezvous from plain environment variables."""
    _load(args, overrides)  # fail here, once, on a bad config rather than in every rank
    nnodes = _env_int(NNODES_ENV, 1, 1)
    node_rank = _env_int(NODE_RANK_ENV, 0, 0)
    if node_rank >= nnodes:
        from .config import ConfigError
        raise ConfigError(f"NODE_RANK={node_rank} must be below NNODES={nnodes}: number nodes 0..NNODES-1")
    import torch

    from .hardware import cuda_usable
    gpus = torch.cuda.device_count() if cuda_usable() else 0
    nproc = _env_int(NPROC_PER_NODE_ENV, max(1, gpus), 1)
    if nnodes == 1 and nproc == 1:
        return cmd_train(args, overrides)
    addr = os.environ.get(MASTER_ADDR_ENV, "127.0.0.1")
    port = _env_int(MASTER_PORT_ENV, DEFAULT_MASTER_PORT, 1)
    if node_rank == 0:
        _check_port_free(port)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--node-rank={node_rank}",
           f"--nproc-per-node={nproc}", f"--master-addr={addr}", f"--master-port={port}", "--max-restarts=0",
           "-m", "selfplay", "train", "--config", str(resolve_config(args.config)), *overrides]
    print(f"launch: node {node_rank}/{nnodes}, {nproc} rank(s) here, master {addr}:{port}", flush=True)
    report = Path(tempfile.gettempdir()) / f"selfplay-torchrun-{os.getpid()}.log"
    # Each rank sets its own thread counts (actors 1, the learner the cores they leave); naming the variable
    # spares the user torchrun's banner about it.
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace", env=env)
    relay = _TorchrunRelay(child.stderr, report)
    relay.start()
    signalled = []

    def forward(signum, _frame):  # torchrun passes it on to every rank, which checkpoints and exits
        signalled.append(signum)
        child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    code = child.wait()
    relay.join(timeout=30)
    # torchrun exits non-zero when it was signalled even though the ranks stopped cleanly
    if signalled and code in (0, 1, -signal.SIGTERM, 128 + signal.SIGTERM):
        report.unlink(missing_ok=True)
        return 0
    if code != 0 and not relay.rank_said_why:
        print(f"selfplay: error: a rank failed without saying why (torchrun exit {code}): torchrun's report is in "
              f"{report}", file=sys.stderr, flush=True)
    else:  # kept only where the error line names it: every other failure already said why in one line
        report.unlink(missing_ok=True)
    return code


class _TorchrunRelay(threading.Thread):
    """Passes the ranks' stderr through and files torchrun's own log lines, its closing ChildFailedError
    report (a screen of traceback after the rank's one line that said what failed) and the resource
    trackers' warnings in ``report``."""

    OWN_LINE = re.compile(r"^[EWI]\d{4} [\d:.]+ +\d+ \S*torch/")  # torchrun's logging: W1123 08:25:02.68 7807 …/torch/…
    # A killed rank cannot unlink its shared memory and semaphores; its multiprocessing resource tracker does,
    # and warns about each kind in two lines ("...resource_tracker.py:254: UserWarning: resource_tracker: There
    # appear to be 1 leaked semaphore objects ..." and the warnings.warn source line). Cleaned up, so not news.
    TRACKER_LINE = re.compile(r"resource_tracker")

    def __init__(self, stream, report: Path):
        super().__init__(daemon=True)
        self.stream, self.report = stream, report
        self.rank_said_why = False

    def run(self) -> None:
        in_report, log = False, None
        for line in self.stream:
            if in_report or self.OWN_LINE.match(line) or self.TRACKER_LINE.search(line):
                in_report = in_report or "failed (exitcode" in line
                log = log or open(self.report, "a", encoding="utf-8")  # noqa: SIM115 (closed below)
                log.write(line)
                continue
            self.rank_said_why = self.rank_said_why or "selfplay: error:" in line
            sys.stderr.write(line)
            sys.stderr.flush()
        if log is not None:
            log.close()


def _check_port_free(port: int) -> None:
    """Node 0 serves the rendezvous on MASTER_PORT: say so at once when something else holds it."""
    import errno
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torchrun's store binds it
        try:
            probe.bind(("", port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            from .config import ConfigError
            raise ConfigError(f"MASTER_PORT={port} is in use on this node (another run? `ss -ltnp | grep {port}`): "
                              f"stop it, or set MASTER_PORT to a free port on every node") from None


def cmd_eval(args, _overrides) -> int:
    import torch

    from . import checkpoint, evaluate
    from .config import from_dict
    from .hardware import inference_dtype
    from .inference import NetworkEvaluator
    from .model import build_model

    path = checkpoint.resolve(args.checkpoint)
    payload = checkpoint.load(path)
    cfg = from_dict(payload["config"])
    if cfg.game.name != "connect4":
        from .config import ConfigError
        raise ConfigError(f"{path} plays {cfg.game.name}: the Pons test sets grade connect4 checkpoints only")
    torch.set_num_threads(args.threads)
    from .games import make_game
    model = build_model(make_game("connect4"), cfg.model.channels, cfg.model.blocks)
    model.load_state_dict(checkpoint.playing_weights(payload))
    sets = evaluate.load_sets(evaluate.find_pons_dir(args.pons_dir or cfg.eval.pons_dir), args.positions)
    sims = args.simulations or cfg.eval.simulations
    result = evaluate.evaluate(NetworkEvaluator(model.eval(), inference_dtype(args.precision)), sets, sims,
                               cfg.search.c_puct)
    result["_meta"].update(checkpoint=str(path), step=int(payload["step"]))
    print(f"{path} (step {payload['step']})")
    print(evaluate.format_table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True))
    return 0


def cmd_arena(args, _overrides) -> int:
    import torch

    from . import arena, checkpoint
    from .config import ConfigError
    from .games import make_game
    from .players import network_player
    from .stats import RunLog

    if args.games < 2 or args.previous < 0 or args.opening_plies < 0 or args.simulations < 0:
        raise ConfigError("--games must be >= 2, --previous, --opening-plies and --simulations >= 0: fix the flag")
    torch.set_num_threads(args.threads)
    if args.every_checkpoint:
        run_dir = Path(args.checkpoint)
        run_dir = run_dir if run_dir.is_dir() else run_dir.parent
        try:
            ladder = arena.ladder_of_run(run_dir, args.baselines, args.games, args.simulations, args.opening_plies,
                                         args.seed, args.precision, args.previous,
                                         say=lambda line: print(line, flush=True))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        print(arena.format_ladder(ladder))
        if args.json:
            Path(args.json).write_text(json.dumps(arena.ladder_summary(ladder), indent=2))
        return 0
    path = checkpoint.resolve(args.checkpoint)
    payload = checkpoint.load(path)
    game = make_game(payload["config"]["game"]["name"])
    try:
        baselines = arena.parse_baselines(game, args.baselines)
    except ValueError as e:
        raise ConfigError(f"--baselines: {e}") from None
    sims = args.simulations or payload["config"].get("eval", {}).get("simulations", 25)
    step = int(payload["step"])
    newest = network_player(game, payload, sims, arena.step_name(step), args.precision)
    earlier = [p for p in checkpoint.list_checkpoints(path.parent) if int(checkpoint.NAME.match(p.name)[1]) < step]
    previous = []
    for p in earlier[-args.previous:] if args.previous else []:
        before = checkpoint.load(p)
        previous.append(network_player(game, before, sims, arena.step_name(int(before["step"])), args.precision))
    print(f"arena: {path} (step {step}, {game.name}) at {sims} simulations/move, {args.games} games a pairing")
    result = arena.run_arena(game, newest, step, baselines, previous, args.games, sims, args.opening_plies,
                             args.seed, say=lambda line: print(line, flush=True))
    print(arena.format_table(result))
    runlog = RunLog(path.parent, stream=sys.stdout)
    try:
        runlog.record(step, arena.summary(result), kind="arena")
    finally:
        runlog.close()
    print(f"arena record written to {path.parent / 'stats.jsonl'} (step {step})")
    return 0


def _settings_help() -> str:
    """Every section and key, for `selfplay train --help`; defaults, ranges and meanings are in config.py."""
    import dataclasses
    import textwrap

    from .config import SECTIONS
    lines = ["settings: --section.key=value (e.g. --search.simulations=100) or the same keys in the YAML;",
             "defaults, allowed ranges and what each does: packages/selfplay/config.py"]
    for name, cls in SECTIONS.items():
        keys = ", ".join(f.name for f in dataclasses.fields(cls))
        lines += textwrap.wrap(f"{name}: {keys}", 100, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


def cmd_plot(args, overrides) -> int:
    from .plot import plot

    print(f"wrote {plot(Path(args.run), Path(args.out) if args.out else None)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .arena import DEFAULT_OPENING_PLIES, DEFAULT_PREVIOUS  # numpy, not torch: the help stays fast

    parser = argparse.ArgumentParser(prog="selfplay", description="AlphaZero-style self-play trainer.",
                                     epilog="Config overrides: --section.key=value, e.g. --search.simulations=100")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("train", "train in this process (actors + learner); resumes run.dir's checkpoint"),
                            ("launch", ("train on NNODES x NPROC_PER_NODE ranks via torchrun (env: NNODES, "
                                       "NODE_RANK, MASTER_ADDR, MASTER_PORT, NPROC_PER_NODE)")),
                            ("check", "check the config and flags as train would, then exit (0: fine, 2: refused)")):
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=_settings_help(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        p.add_argument("--config", default=DEFAULT_CONFIG,
                       help=f"packaged config name or YAML path (default {DEFAULT_CONFIG})")
    p = sub.add_parser("eval", help="grade a checkpoint on the Pons test sets (weak/strong error, policy and MCTS)")
    p.add_argument("--checkpoint", required=True, help="a ckpt-*.pt file or a run directory (its newest)")
    p.add_argument("--positions", type=int, default=1000, help="positions per set (first N of 1000)")
    p.add_argument("--simulations", type=int, default=0, help="MCTS simulations per move (default: eval.simulations)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    p.add_argument("--pons-dir", default="", help="folder of the Pons sets (default: found automatically)")
    p.add_argument("--json", default="", help="also write the results here")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p = sub.add_parser("arena", help="play a checkpoint against baselines and earlier checkpoints: W/D/L and Elo",
                       description=("The newest checkpoint (or the file named) plays every baseline and its --previous "
                                    "predecessors, the baselines play each other; prints W/D/L, scores with Wilson "
                                    "95%% intervals and an Elo ladder (random = 0), and appends an 'arena' record to "
                                    "the run's stats.jsonl and TensorBoard."),
                       epilog="example: python -m selfplay arena --checkpoint runs/c4 --games 100 --previous 2")
    p.add_argument("--checkpoint", required=True, help="a ckpt-*.pt file or a run directory (its newest)")
    p.add_argument("--games", type=int, default=100, help="games per pairing, half with each side first (default 100)")
    p.add_argument("--baselines", default=DEFAULT_BASELINES,
                   help=(f"comma-separated: random, greedy, minimax<depth>, mcts<simulations> (default "
                         f"{DEFAULT_BASELINES}); random always plays: it anchors the ladder at 0"))
    p.add_argument("--simulations", type=int, default=0,
                   help="MCTS simulations per move of the checkpoints (default: the run's eval.simulations)")
    p.add_argument("--previous", type=int, default=DEFAULT_PREVIOUS,
                   help=f"earlier checkpoints of the run each checkpoint plays (default {DEFAULT_PREVIOUS})")
    p.add_argument("--opening-plies", type=int, default=DEFAULT_OPENING_PLIES,
                   help=("random moves opening each pair of games, a different opening for every pair, so deterministic "
                         f"players' games differ (default {DEFAULT_OPENING_PLIES})"))
    p.add_argument("--seed", type=int, default=0, help="seed of the openings, tie-breaks and rollouts")
    p.add_argument("--every-checkpoint", action="store_true",
                   help=("the run's progress instead: every checkpoint kept in the run plays every baseline and its "
                         "--previous predecessors, on one Elo scale; prints a row per checkpoint, writes nothing to "
                         "the run"))
    p.add_argument("--json", default="", help="with --every-checkpoint: also write the ladder here")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p = sub.add_parser("plot", help="draw a run's Pons error and Elo against minutes into an SVG",
                       epilog="example: python -m selfplay plot --run runs/local  (make plot RUN_DIR=runs/local)")
    p.add_argument("--run", required=True, help="a run directory (its stats.jsonl) or a bench/results/*.json result")
    p.add_argument("--out", default="", help="the SVG to write (default: RUN/progress.svg, or progress-*.svg beside "
                   "a bench result)")
    args, overrides = parser.parse_known_args(argv)
    if args.command in ("eval", "arena", "plot") and overrides:
        parser.error(f"unrecognized arguments: {' '.join(overrides)}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    from .config import ConfigError
    try:
        commands = {"train": cmd_train, "launch": cmd_launch, "check": cmd_check, "eval": cmd_eval, "arena": cmd_arena,
                    "plot": cmd_plot}
        return commands[args.command](args, overrides)
    except ConfigError as e:
        print(f"selfplay: error: {e}", file=sys.stderr)
        return 2
    except _failures() as e:  # evaluated only when an error gets here: `check` needs no torch and stays quick
        if getattr(args, "debug", False):
            raise
        print(f"selfplay: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _failures() -> tuple[type[Exception], ...]:
    from .checkpoint import CheckpointError
    from .evaluate import EvalError
    from .plot import PlotError
    return CheckpointError, EvalError, PlotError, RuntimeError


if __name__ == "__main__":
    sys.exit(main())
