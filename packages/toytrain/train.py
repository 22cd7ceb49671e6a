"""A few DDP steps of linear regression on synthetic data: your own trainer on Gantry's nodes, in one file.

    torchrun --nproc-per-node=2 -m toytrain.train --steps 20 --out runs/toy     # here, two ranks
    make run-gcp ARGS="--sync out --stats out/stats.jsonl -- -m toytrain.train --steps 200"    # every node

What a program does on Gantry's nodes: torchrun sets RANK, WORLD_SIZE and the rendezvous; rank 0 writes a local
folder (--out): stats.jsonl, one {"step": N, ...} record every few steps (`make status` shows N as --stats names
it), and a checkpoint written whole (a temporary name, then a rename). Named with --sync, the folder is the agent's
to copy to the bucket and to put back on a restarted node, so a restart resumes from the checkpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from launch_contract import GANTRY_GPUS_PER_NODE_ENV, LOCAL_RANK_ENV, partial_name
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT = "ckpt.pt"
STATS_FILE = "stats.jsonl"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m toytrain.train", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps in all (a resume counts on)")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per rank and step")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--log-every", type=int, default=2, help="steps between stats.jsonl records")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints (and the last)")
    parser.add_argument("--out", default="out", help="rank 0's folder: stats.jsonl and the checkpoint, resumed from "
                        "(default: out; on a node, name it with --sync)")
    parser.add_argument("--sleep-s", type=float, default=0.0, help="pause after each step: a stand-in for real "
                        "work, so that `make status` can watch a tiny run")
    parser.add_argument("--timeout-s", type=float, default=300, help="rendezvous and collective timeout")
    return parser.parse_args(argv)


def train_record(step: int, loss: float, samples_per_s: float) -> dict:
    """One stats.jsonl line: `gantry status` shows the step and the loss of the newest (--stats out/stats.jsonl)."""
    return {"step": step, "time": round(time.time(), 3), "loss": loss, "charts/samples_per_s": samples_per_s}


def main(argv=None) -> int:
    args = parse_args(argv)
    # ---- init: gloo on CPU, nccl only where CUDA works; torchrun gives the rank and the rendezvous
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get(LOCAL_RANK_ENV, "0"))) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    out = Path(args.out) if rank == 0 else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)

    # ---- data and model: y = x @ w_true + noise, the same w_true on every rank (seed 0), own samples per rank
    w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(0))
    samples = torch.Generator().manual_seed(1337 + rank)
    model = torch.nn.Linear(16, 1).to(device)
    start = torch.zeros(1, dtype=torch.long, device=device)
    if out is not None and (out / CHECKPOINT).exists():
        state = torch.load(out / CHECKPOINT, map_location=device)
        model.load_state_dict(state["model"])
        start[0] = state["step"]
    dist.broadcast(start, src=0)  # DDP broadcasts rank 0's weights; the step goes with them
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step, began = int(start.item()), time.monotonic()
    if rank == 0:
        # torchrun's ranks on this machine, and the GPUs the node agent says it has (0 on a CPU node; unset here)
        per_node = os.environ.get("LOCAL_WORLD_SIZE", "?")
        gpus = os.environ.get(GANTRY_GPUS_PER_NODE_ENV, "unset")
        print(f"toytrain: {world} rank(s) over {backend}, {per_node} per node ({GANTRY_GPUS_PER_NODE_ENV}={gpus}), "
              f"steps {step} -> {args.steps}, output {out}", flush=True)

    # ---- loop
    while step < args.steps:
        x = torch.randn(args.batch_size, 16, generator=samples).to(device)
        y = x @ w_true.to(device) + 0.01 * torch.randn(args.batch_size, 1, generator=samples).to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()  # DDP averages the gradients over every rank of every node
        optimizer.step()
        step += 1
        time.sleep(args.sleep_s)
        if out is None:
            continue
        if step % args.log_every == 0 or step == args.steps:
            rate = step * args.batch_size * world / max(time.monotonic() - began, 1e-9)
            with open(out / STATS_FILE, "a", encoding="utf-8") as stats:
                stats.write(json.dumps(train_record(step, round(loss.item(), 6), round(rate, 1))) + "\n")
            print(f"toytrain: step {step} loss {loss.item():.4f}", flush=True)
        if step % args.checkpoint_every == 0 or step == args.steps:
            torch.save({"model": model.module.state_dict(), "step": step}, out / partial_name(CHECKPOINT))
            os.replace(out / partial_name(CHECKPOINT), out / CHECKPOINT)  # whole, or not at all

    # ---- teardown: every rank waits for rank 0's last checkpoint, so exit 0 means the run's folder is whole
    dist.barrier()
    if rank == 0:
        print(f"toytrain: finished at step {step}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
