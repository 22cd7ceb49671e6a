"""selfplay eval: grade a checkpoint on the Pons test sets (weak and strong error, raw policy and MCTS)."""

from __future__ import annotations

import json
from pathlib import Path

from selfplay import evaluate
from selfplay.config_io import from_dict
from selfplay.errors import ConfigError, ExitStatus
from selfplay.games import make_game

NAME = "eval"
HELP = "grade a checkpoint on the Pons test sets (weak/strong error, policy and MCTS)"
INT8_CALIBRATION_POSITIONS = 20  # per set: --precision int8 measures its ranges on the leaves of their search


def add_arguments(parser) -> None:
    parser.add_argument("--checkpoint", required=True, help="a ckpt-*.pt file or a run directory (its newest)")
    parser.add_argument("--positions", type=int, default=1000, help="positions per set (first N of 1000)")
    parser.add_argument("--simulations", type=int, default=0,
                        help="MCTS simulations per move (default: eval.simulations)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--precision", choices=("auto", "fp32", "bf16", "int8"), default="auto",
                        help="the numbers the net computes in: auto (bf16 where the CPU has it, else fp32), or int8 as "
                             "int8 actors play (ONNX Runtime, its ranges measured on this search's own leaves)")
    parser.add_argument("--pons-dir", default="", help="folder of the Pons sets (default: found automatically)")
    parser.add_argument("--json", default="", help="also write the results here")
    parser.add_argument("--breakdown", action="store_true",
                        help="also say where MCTS errs: by result, by how many moves keep it, by how late a win "
                             "comes, and whether the raw policy or the value head chose the erring move")
    parser.add_argument("--selfplay-games", type=int, default=0, metavar="N",
                        help="also play N self-play games with the weights the actors played (the learner's own, not "
                             "the graded average) under the run's own self-play settings and say, with the solver, "
                             "which moves changed their result (where the draws come from)")


def run(args, _overrides) -> int:
    if args.selfplay_games < 0:
        raise ConfigError(f"--selfplay-games={args.selfplay_games}: give a number of games, or 0 for none")
    import torch  # torch and what runs on it: not for `--help` or the other verbs

    from selfplay import checkpoint
    from selfplay.hardware import inference_dtype
    from selfplay.inference import NetworkEvaluator
    from selfplay.model import build_model

    path = checkpoint.resolve(args.checkpoint)
    saved = checkpoint.load(path)
    cfg = from_dict(saved.config)
    if cfg.game.name != "connect4":
        raise ConfigError(f"{path} plays {cfg.game.name}: the Pons test sets grade connect4 checkpoints only")
    torch.set_num_threads(args.threads)

    sets = evaluate.load_sets(evaluate.find_pons_dir(args.pons_dir or cfg.eval.pons_dir), args.positions)
    sims = args.simulations or cfg.eval.simulations

    def network_of(weights: dict) -> NetworkEvaluator:
        model = build_model(make_game("connect4"), cfg.model.channels, cfg.model.blocks).eval()
        model.load_state_dict(weights)
        if args.precision != "int8":
            return NetworkEvaluator(model, inference_dtype(args.precision))
        # as an actor: fp32 until it has evaluated a batch of leaves, then quantized with the ranges measured on that
        # batch; here the last batch of the same search over the first positions of each set
        network = NetworkEvaluator(model, None, "onnxruntime", int8=True)
        first = [evaluate.PonsSet(s.name, s.moves[:INT8_CALIBRATION_POSITIONS], s.labels[:INT8_CALIBRATION_POSITIONS])
                 for s in sets]
        evaluate.evaluate(network, first, sims, cfg.search.c_puct)
        network.refresh(model)
        return network

    network = network_of(saved.playing_weights())
    result = evaluate.evaluate(network, sets, sims, cfg.search.c_puct, args.breakdown)
    result["_meta"].update(checkpoint=str(path), step=saved.step)
    print(f"{path} (step {saved.step})")
    print(evaluate.format_table(result))
    if args.breakdown:
        print(evaluate.format_breakdown(result))
    if args.selfplay_games:
        import numpy as np

        from selfplay import audit
        from selfplay.actors import SelfPlayWorker

        cfg.actors.games = args.selfplay_games  # one lock-step batch, each slot's first game
        worker = SelfPlayWorker(make_game("connect4"), network_of(saved.selfplay_weights()), cfg,
                                np.random.default_rng(cfg.run.seed))
        result["selfplay_audit"] = audit.audit(audit.play_games(worker, args.selfplay_games))
        print(audit.format_audit(result["selfplay_audit"]))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True))
    return ExitStatus.OK
