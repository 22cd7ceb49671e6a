"""Chess self-play: a tiny value network plays itself on every GPU (or a few CPU processes) and learns from results.

    pip install -r requirements.txt
    python scripts/train_multi_gpu.py --gpus cpu --iterations 3        # CPU: 2 self-play processes
    python scripts/train_multi_gpu.py --gpus all --iterations 200      # one self-play process per visible GPU (none: CPU)
    python scripts/train_multi_gpu.py --gpus 0,1 --save-dir runs/a     # the GPUs you name

Each iteration: the self-play processes play --games-per-iter games with the newest weights, picking each move by
a one-ply lookahead (the network scores every position a legal move leads to) with some exploration; then one
learner step fits the network to the games' results. A game cut at --max-plies is scored by material.

It resumes by itself: the newest SAVE_DIR/model_N.pt is loaded and training continues at iteration N + 1.
SIGTERM or Ctrl-C: the current write is finished, then it exits 143 (128 + SIGTERM) or 130, as a stopped program
does; the iteration being played is dropped (the newest checkpoint holds everything before it).

Several nodes (torchrun-style environment, read only if present): RANK or NODE_RANK, WORLD_SIZE or NNODES. Each
node trains its own copy, seeded by its rank, into SAVE_DIR on its own disk.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import sys
import time
from pathlib import Path

import chess
import numpy as np
import torch
from torch import nn

KEEP_CHECKPOINTS = 3  # the newest few: room to step back a little without filling the disk
TEMPERATURE = 0.3  # softmax over the lookahead's values: higher plays more varied games
EPSILON = 0.1  # the chance of a uniformly random move, so even a sure network explores
LEARNING_RATE = 1e-3
EPOCHS_PER_ITERATION = 2  # passes over one iteration's positions in its learner step
BATCH_SIZE = 256
PIECE_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9}
PLANES = [(color, piece) for color in (chess.WHITE, chess.BLACK) for piece in chess.PIECE_TYPES]
FEATURES = len(PLANES) * 64 + 5  # 12 piece planes, the side to move, 4 castling rights
CHECKPOINT = re.compile(r"model_(\d+)\.pt$")


# ---- the game and the network ------------------------------------------------------------------------------------
def encode(board: chess.Board) -> np.ndarray:
    """The position as FEATURES 0/1 bytes, seen from White: one 64-square plane per (colour, piece)."""
    masks = np.array([board.pieces_mask(piece, color) for color, piece in PLANES], dtype="<u8")
    squares = np.unpackbits(masks.view(np.uint8), bitorder="little")  # bit i of a mask is square i
    extras = [board.turn == chess.WHITE,
              board.has_kingside_castling_rights(chess.WHITE), board.has_queenside_castling_rights(chess.WHITE),
              board.has_kingside_castling_rights(chess.BLACK), board.has_queenside_castling_rights(chess.BLACK)]
    return np.concatenate([squares, np.array(extras, dtype=np.uint8)])


class ValueNet(nn.Module):
    """Board planes -> White's expected result in [-1, 1] (1 White wins, 0 draw, -1 Black wins)."""

    def __init__(self, hidden: int = 128):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, hidden // 2), nn.ReLU(),
                                  nn.Linear(hidden // 2, 1), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).squeeze(-1)


def result_for_white(board: chess.Board) -> int:
    """1, 0 or -1: the rules' result when the game is over, else the material balance (a cut game)."""
    outcome = board.outcome()
    if outcome is not None:
        return 0 if outcome.winner is None else (1 if outcome.winner == chess.WHITE else -1)
    balance = sum(value * (len(board.pieces(piece, chess.WHITE)) - len(board.pieces(piece, chess.BLACK)))
                  for piece, value in PIECE_VALUES.items())
    return int(np.sign(balance))


@torch.no_grad()
def play_game(net: ValueNet, device: torch.device, rng: np.random.Generator, max_plies: int):
    """One game of the network against itself: (the positions it reached as uint8 rows, White's result)."""
    board, positions = chess.Board(), []
    while board.ply() < max_plies and board.outcome() is None:
        moves = list(board.legal_moves)
        children = []
        for move in moves:
            board.push(move)
            children.append(encode(board))
            board.pop()
        children = np.stack(children)
        values = net(torch.from_numpy(children).to(device, torch.float32)).cpu().numpy()
        scores = values if board.turn == chess.WHITE else -values  # each side wants its own result
        if rng.random() < EPSILON:
            pick = rng.integers(len(moves))
        else:
            weights = np.exp((scores - scores.max()) / TEMPERATURE)
            pick = rng.choice(len(moves), p=weights / weights.sum())
        board.push(moves[pick])
        positions.append(children[pick])
    return np.stack(positions), result_for_white(board)


def selfplay_worker(device: str, seed: list, tasks: mp.Queue, results: mp.Queue) -> None:
    """A spawned process: plays the games each task asks for with the weights it brings, until told None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches every process: the main one decides
    results.cancel_join_thread()  # at exit, a result nobody will read must not keep this process waiting
    torch.set_num_threads(1)  # the processes share the cores; one thread each avoids oversubscription
    net, rng = ValueNet().to(device).eval(), np.random.default_rng(seed)
    parent = mp.parent_process()
    while parent is not None and parent.is_alive():  # a killed main process leaves no orphan behind
        try:
            task = tasks.get(timeout=1.0)
        except queue.Empty:
            continue
        if task is None:
            return
        weights, games, max_plies = task
        net.load_state_dict(weights)
        results.put([play_game(net, torch.device(device), rng, max_plies) for _ in range(games)])


# ---- checkpoints and stats: written whole or not at all ---------------------------------------------------------
def atomic_write(path: Path, write) -> None:
    """write(temp path), then rename over path: a reader (or a resume) never sees half a file."""
    temp = path.with_name(path.name + ".tmp")
    write(temp)
    os.replace(temp, path)


def checkpoints(save_dir: Path) -> list[tuple[int, Path]]:
    found = [(int(m.group(1)), p) for p in save_dir.glob("model_*.pt") if (m := CHECKPOINT.search(p.name))]
    return sorted(found)


def save(save_dir: Path, iteration: int, state: dict, stats: dict) -> None:
    atomic_write(save_dir / f"model_{iteration}.pt", lambda temp: torch.save(state, temp))
    atomic_write(save_dir / "training_stats.json", lambda temp: temp.write_text(json.dumps(stats) + "\n"))
    for _, old in checkpoints(save_dir)[:-KEEP_CHECKPOINTS]:
        old.unlink(missing_ok=True)


# ---- the command line ----------------------------------------------------------------------------------------------
def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="cpu", help="GPU indices '0,1', 'all', or 'cpu'/'none' (default: cpu)")
    parser.add_argument("--workers", type=int, default=2, help="self-play processes on CPU (default: 2)")
    parser.add_argument("--iterations", type=int, default=10, help="train until this iteration (default: 10)")
    parser.add_argument("--games-per-iter", type=int, default=8, help="self-play games per iteration (default: 8)")
    parser.add_argument("--max-plies", type=int, default=60, help="cut a game after this many plies (default: 60)")
    parser.add_argument("--save-dir", default="checkpoints", help="checkpoints and stats (default: checkpoints)")
    parser.add_argument("--seed", type=int, default=1337, help="random seed; node N adds N (default: 1337)")
    args = parser.parse_args(argv)
    for flag in ("workers", "iterations", "games_per_iter", "max_plies"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1, not {getattr(args, flag)}")
    args.devices = devices(parser, args.gpus, args.workers)
    return args


def devices(parser: argparse.ArgumentParser, gpus: str, workers: int) -> list[str]:
    """One self-play process per device: each named GPU once, or 'cpu' --workers times."""
    choice = gpus.strip().lower()
    if choice in ("", "cpu", "none"):
        return ["cpu"] * workers
    if choice != "all" and not re.fullmatch(r"\d+(,\d+)*", choice):
        parser.error(f"--gpus {gpus!r}: give GPU indices like 0,1, or 'all', or 'cpu'")
    visible = torch.cuda.device_count()
    if visible == 0 and choice == "all":  # every GPU there is: none, so the CPU, as --gpus cpu
        print(f"--gpus all: no CUDA device is visible here; self-play on {workers} CPU process(es)", flush=True)
        return ["cpu"] * workers
    if visible == 0:
        parser.error(f"--gpus {gpus}: no CUDA device is visible here; use --gpus cpu")
    indices = range(visible) if choice == "all" else [int(index) for index in choice.split(",")]
    if wrong := [i for i in indices if i >= visible]:
        parser.error(f"--gpus {gpus}: there is no GPU {wrong[0]} here, only 0 to {visible - 1}")
    return [f"cuda:{i}" for i in dict.fromkeys(indices)]


def node_from_env() -> tuple[int, int]:
    """(rank, world size) from a torchrun-style environment; (0, 1) when there is none."""
    rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", "0")))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", "1")))
    return rank, world


class StopRequest:
    """SIGTERM/SIGINT set a flag; the loop looks at it where stopping loses nothing half-written."""

    def __init__(self):
        self.code = None
        signal.signal(signal.SIGTERM, self.request)
        signal.signal(signal.SIGINT, self.request)

    def request(self, signum, frame):
        self.code = 128 + signum  # 143 for SIGTERM, 130 for Ctrl-C: what a shell reports for a stopped program


def collect(workers, tasks, results, stop: StopRequest, weights: dict, games: int, max_plies: int):
    """Share the games out, wait for every worker's; None when a stop was asked for in the meantime."""
    shares = [games // len(workers) + (i < games % len(workers)) for i in range(len(workers))]
    for task_queue, share in zip(tasks, shares):
        if share:
            task_queue.put((weights, share, max_plies))
    played, waiting = [], sum(1 for share in shares if share)
    while waiting:
        if stop.code is not None:
            return None
        try:
            played += results.get(timeout=0.2)
            waiting -= 1
        except queue.Empty:
            dead = [w.name for w in workers if not w.is_alive()]
            if dead and stop.code is None:  # a signal to the whole group ends the workers too: not a crash
                raise RuntimeError(f"self-play process {dead[0]} died; see its error above") from None
    return played


def learn(net: ValueNet, optimizer, positions: np.ndarray, targets: np.ndarray, device: str) -> float:
    """A few passes of mean-squared error between the network's value and each position's game result."""
    x = torch.from_numpy(positions).to(device, torch.float32)
    z = torch.from_numpy(targets).to(device, torch.float32)
    net.train()
    losses = []
    for _ in range(EPOCHS_PER_ITERATION):
        for batch in torch.randperm(len(x), device=device).split(BATCH_SIZE):
            loss = nn.functional.mse_loss(net(x[batch]), z[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    net.eval()
    return float(np.mean(losses[-max(1, len(losses) // EPOCHS_PER_ITERATION):]))  # the last pass


def main(argv=None) -> int:
    args = parse_args(argv)
    rank, world = node_from_env()
    save_dir = Path(args.save_dir)  # each node's own disk
    save_dir.mkdir(parents=True, exist_ok=True)
    learner_device = args.devices[0]
    torch.manual_seed(args.seed + rank)
    net = ValueNet().to(learner_device)
    optimizer = torch.optim.Adam(net.parameters(), lr=LEARNING_RATE)
    iteration, elapsed = 0, 0.0
    if found := checkpoints(save_dir):
        state = torch.load(found[-1][1], map_location=learner_device)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        iteration, elapsed = state["iteration"], state["elapsed_s"]
        print(f"resumed from {found[-1][1]} at iteration {iteration}", flush=True)
    if world > 1:
        print(f"node {rank} of {world}: this node trains its own copy into {save_dir}", flush=True)
    if iteration >= args.iterations:
        print(f"already at iteration {iteration} of {args.iterations}: nothing to do", flush=True)
        return 0

    stop = StopRequest()
    spawn = mp.get_context("spawn")  # CUDA cannot be used in a forked child
    results = spawn.Queue()
    tasks = [spawn.Queue() for _ in args.devices]
    workers = [spawn.Process(target=selfplay_worker, name=f"self-play-{i}-{device}", daemon=True,
                             args=(device, [args.seed, rank, i, iteration], task_queue, results))
               for i, (device, task_queue) in enumerate(zip(args.devices, tasks))]
    for worker in workers:
        worker.start()
    print(f"self-play on {', '.join(args.devices)}; learner on {learner_device}; "
          f"iterations {iteration} -> {args.iterations}", flush=True)
    try:
        while iteration < args.iterations and stop.code is None:
            started = time.monotonic()
            weights = {name: tensor.cpu() for name, tensor in net.state_dict().items()}
            played = collect(workers, tasks, results, stop, weights, args.games_per_iter, args.max_plies)
            if played is None:
                break  # stopped mid-play: this iteration's games are dropped, the last checkpoint stands
            positions = np.concatenate([game for game, _ in played])
            outcomes = [result for _, result in played]
            targets = np.concatenate([np.full(len(game), result, np.float32) for game, result in played])
            loss = learn(net, optimizer, positions, targets, learner_device)
            iteration, elapsed = iteration + 1, elapsed + time.monotonic() - started
            stats = {"iteration": iteration, "games": len(played), "positions": len(positions),
                     "loss": round(loss, 5), "wins": outcomes.count(1), "draws": outcomes.count(0),
                     "losses": outcomes.count(-1), "elapsed_s": round(elapsed, 2)}  # wins/losses: White's
            save(save_dir, iteration, {"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                                       "iteration": iteration, "elapsed_s": elapsed, "args": vars(args)}, stats)
            print(f"iteration {iteration}/{args.iterations}: {len(played)} games, {len(positions)} positions, "
                  f"loss {loss:.4f}, white +{stats['wins']} ={stats['draws']} -{stats['losses']}, "
                  f"{time.monotonic() - started:.1f} s", flush=True)
    finally:
        for task_queue in tasks:
            task_queue.cancel_join_thread()  # unread weights in a queue must not hold up the exit
            task_queue.put(None)
        for worker in workers:
            worker.join(timeout=0 if stop.code is not None else 10)  # stopping: their half-played games go
            if worker.is_alive():
                worker.kill()
                worker.join()
    if stop.code is not None:
        print(f"stopped by signal {stop.code - 128} at iteration {iteration}", flush=True)
        return stop.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
