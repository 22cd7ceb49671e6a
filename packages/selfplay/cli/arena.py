"""selfplay arena: a checkpoint against baselines and earlier checkpoints: W/D/L and an Elo ladder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from selfplay import arena
from selfplay.errors import ConfigError, ExitStatus
from selfplay.games import make_game
from selfplay.players import network_player
from selfplay.stats import RunLog

NAME = "arena"
HELP = "play a checkpoint against baselines and earlier checkpoints: W/D/L and Elo"
DESCRIPTION = ("The newest checkpoint (or the file named) plays every baseline and its --previous predecessors, the "
               "baselines play each other; prints W/D/L, scores with Wilson 95%% intervals and an Elo ladder (random "
               "= 0), and appends an 'arena' record to the run's stats.jsonl and TensorBoard.")
EPILOG = "example: python -m selfplay arena --checkpoint runs/c4 --games 100 --previous 2"
DEFAULT_BASELINES = "random,greedy,minimax5,mcts1000"  # AlphaZero.jl's Connect Four baselines (see players.py)


def add_arguments(parser) -> None:
    parser.add_argument("--checkpoint", required=True, help="a ckpt-*.pt file or a run directory (its newest)")
    parser.add_argument("--games", type=int, default=100,
                        help="games per pairing, half with each side first (default 100)")
    parser.add_argument("--baselines", default=DEFAULT_BASELINES,
                        help=(f"comma-separated: random, greedy, minimax<depth>, mcts<simulations> (default "
                              f"{DEFAULT_BASELINES}); random always plays: it anchors the ladder at 0"))
    parser.add_argument("--simulations", type=int, default=0,
                        help="MCTS simulations per move of the checkpoints (default: the run's eval.simulations)")
    parser.add_argument("--previous", type=int, default=arena.DEFAULT_PREVIOUS,
                        help=f"earlier checkpoints of the run each checkpoint plays (default {arena.DEFAULT_PREVIOUS})")
    parser.add_argument("--opening-plies", type=int, default=arena.DEFAULT_OPENING_PLIES,
                        help=("random moves opening each pair of games, a different opening for every pair, so "
                              f"deterministic players' games differ (default {arena.DEFAULT_OPENING_PLIES})"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the openings, tie-breaks and rollouts")
    parser.add_argument("--every-checkpoint", action="store_true",
                        help=("the run's progress instead: every checkpoint kept in the run plays every baseline and "
                              "its --previous predecessors, on one Elo scale; prints a row per checkpoint, writes "
                              "nothing to the run"))
    parser.add_argument("--json", default="", help="with --every-checkpoint: also write the ladder here")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto")


def run(args, _overrides) -> int:
    import torch  # torch and the checkpoints: not for `--help` or the other verbs

    from selfplay import checkpoint

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
        return ExitStatus.OK
    path = checkpoint.resolve(args.checkpoint)
    saved = checkpoint.load(path)
    game = make_game(saved.config["game"]["name"])
    try:
        baselines = arena.parse_baselines(game, args.baselines)
    except ValueError as e:
        raise ConfigError(f"--baselines: {e}") from None
    sims = args.simulations or saved.config.get("eval", {}).get("simulations", 25)
    step = saved.step
    newest = network_player(game, saved.config, saved.playing_weights(), sims, arena.step_name(step), args.precision)
    earlier = [p for p in checkpoint.list_checkpoints(path.parent) if int(checkpoint.NAME.match(p.name)[1]) < step]
    previous = []
    for p in earlier[-args.previous:] if args.previous else []:
        before = checkpoint.load(p)
        previous.append(network_player(game, before.config, before.playing_weights(), sims,
                                       arena.step_name(before.step), args.precision))
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
    return ExitStatus.OK
