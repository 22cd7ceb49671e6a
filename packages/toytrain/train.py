"""A few DDP steps of linear regression on synthetic data: your own trainer on Gantry's nodes, in one file.

    torchrun --nproc-per-node=2 -m toytrain.train --steps 20 --out runs/toy     # here, two ranks
    make run-gcp ARGS="-- -m toytrain.train --steps 200"                        # every node, into the bucket

What the nodes expect of a program (launch_contract.py): torchrun sets RANK, WORLD_SIZE and
the rendezvous; GANTRY_RUN_DIR names the run's folder in the bucket and GANTRY_STAGING a local folder that
survives restarts. Rank 0 writes stats.jsonl there, one {"kind": "train", "step": N, ...} record every few
steps (`make status` shows N), and a checkpoint, then copies both to the bucket; a restart resumes from it.
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
from launch_contract import (
    KIND_KEY,
    LOCAL_RANK_ENV,
    RUN_DIR_ENV,
    STAGING_ENV,
    STATS_FILE,
    STEP_KEY,
    TRAIN_KIND,
    partial_name,
)
from torch.nn.parallel import DistributedDataParallel

CHECKPOINT = "ckpt.pt"


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m toytrain.train", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps in all (a resume counts on)")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per rank and step")
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--log-every", type=int, default=2, help="steps between stats.jsonl records")
    parser.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints (and the last)")
    parser.add_argument("--out", default="", help=f"run folder or fsspec URL (default: ${RUN_DIR_ENV}, "
                        "else runs/toytrain)")
    parser.add_argument("--sleep-s", type=float, default=0.0, help="pause after each step: a stand-in for real "
                        "work, so that `make status` can watch a tiny run")
    parser.add_argument("--timeout-s", type=float, default=300, help="rendezvous and collective timeout")
    return parser.parse_args(argv)


def train_record(step: int, loss: float, samples_per_s: float) -> dict:
    """One stats.jsonl line the node agent reports (launch_contract.newest_record)."""
    return {KIND_KEY: TRAIN_KIND, STEP_KEY: step, "time": round(time.time(), 3), "loss": loss,
            "charts/samples_per_s": samples_per_s}


class Output:
    """Rank 0's folder: local, or staged under GANTRY_STAGING and copied to a bucket URL after each write."""

    def __init__(self, where: str):
        self.url = where
        remote = "://" in where
        staging = Path(os.environ.get(STAGING_ENV) or "runs/staging")
        self.local = staging / where.rstrip("/").rsplit("/", 1)[-1] if remote else Path(where)
        self.local.mkdir(parents=True, exist_ok=True)
        self.fs = self.root = None
        if remote:
            import fsspec  # in the trainer image; gcsfs answers gs://

            self.fs, self.root = fsspec.core.url_to_fs(where)
            self.fs.makedirs(self.root, exist_ok=True)
            for name in (CHECKPOINT, STATS_FILE):  # a fresh VM resumes from the bucket
                if not (self.local / name).exists() and self.fs.exists(f"{self.root}/{name}"):
                    self.fs.get(f"{self.root}/{name}", str(self.local / name))

    def push(self, *names: str) -> None:
        for name in names if self.fs else ():
            self.fs.put(str(self.local / name), partial_name(f"{self.root}/{name}"))  # readers never see half a file
            self.fs.mv(partial_name(f"{self.root}/{name}"), f"{self.root}/{name}")


def main(argv=None) -> int:
    args = parse_args(argv)
    # ---- init: gloo on CPU, nccl only where CUDA works; torchrun gives the rank and the rendezvous
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=args.timeout_s))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get(LOCAL_RANK_ENV, "0"))) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    out = Output(args.out or os.environ.get(RUN_DIR_ENV) or "runs/toytrain") if rank == 0 else None

    # ---- data and model: y = x @ w_true + noise, the same w_true on every rank (seed 0), own samples per rank
    w_true = torch.randn(16, 1, generator=torch.Generator().manual_seed(0))
    samples = torch.Generator().manual_seed(1337 + rank)
    model = torch.nn.Linear(16, 1).to(device)
    start = torch.zeros(1, dtype=torch.long, device=device)
    if out is not None and (out.local / CHECKPOINT).exists():
        state = torch.load(out.local / CHECKPOINT, map_location=device)
        model.load_state_dict(state["model"])
        start[0] = state["step"]
    dist.broadcast(start, src=0)  # DDP broadcasts rank 0's weights; the step goes with them
    model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step, began = int(start.item()), time.monotonic()
    if rank == 0:
        print(f"toytrain: {world} rank(s) over {backend}, steps {step} -> {args.steps}, output {out.url}", flush=True)

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
            with open(out.local / STATS_FILE, "a", encoding="utf-8") as stats:
                stats.write(json.dumps(train_record(step, round(loss.item(), 6), round(rate, 1))) + "\n")
            print(f"toytrain: step {step} loss {loss.item():.4f}", flush=True)
        if step % args.checkpoint_every == 0 or step == args.steps:
            torch.save({"model": model.module.state_dict(), "step": step}, out.local / f".{CHECKPOINT}.tmp")
            os.replace(out.local / f".{CHECKPOINT}.tmp", out.local / CHECKPOINT)
            out.push(CHECKPOINT, STATS_FILE)

    # ---- teardown: every rank waits for rank 0's last upload, so exit 0 means the run is in the bucket
    dist.barrier()
    if rank == 0:
        print(f"toytrain: finished at step {step}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
