"""make bench's measured cases: self-play and learner throughput per core in this process, the ISA and precision
variants, and timed trainings (a rank count, an inference placement) in subprocesses. bench.run calls them in the
order its JSON lists them."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch
from selfplay.actors import SelfPlayWorker
from selfplay.config_io import load, resolve_config
from selfplay.distributed import DistInfo
from selfplay.games import make_game
from selfplay.hardware import Precision, cpu_has_native_bf16, inference_dtype, pick_precision
from selfplay.inference import NetworkEvaluator, actor_dtype, runs_int8
from selfplay.learner import Learner
from selfplay.model import build_model, count_parameters

AZG_SIMS_PER_S = {"default-512ch": 97.0, "64ch": 1274.0}

# What an AVX2-only CPU (no AVX-512, no bf16) runs, on this one: ATen's kernels, oneDNN's convolutions and
# MKL's GEMMs held to AVX2. An emulation (same caches, clocks and core), not a measurement on such a CPU.
AVX2_ONLY_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


# Self-play cases of a CPU without bf16: (kernels, runtime); "int8" is ONNX Runtime's int8 graph (actors.precision=int8).
# ONNX Runtime picks its kernels from CPUID and ignores AVX2_ONLY_ENV, so it is measured natively only: on an
# AVX2-only CPU those are the AVX2 rows.
FP32_CASES = (("native", "torch"), ("native", "onnxruntime"), ("native", "int8"), ("avx2", "torch"))


def machine() -> dict:
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("model name")), platform.processor())
    flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.startswith("flags")), [])
    # what decides the network's speed: fp32 on AVX2/AVX-512, bf16 only with avx512_bf16 or AMX
    vector = [f for f in flags if f in ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_tile")]
    return {"cpu": model, "cores": os.cpu_count(), "cpu_flags": vector, "torch": torch.__version__,
            "python": platform.python_version(), "inference_dtype": str(inference_dtype()).replace("torch.", ""),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def selfplay_throughput(channels: int, blocks: int, games: int, sims: int, seconds: float,
                        full_fraction: float = 1.0, dtype: torch.dtype | None | str = "auto",
                        runtime: str = "auto") -> dict:
    """One actor's loop (search + play + sample bookkeeping) on one core, against its forward-only limit.

    ``full_fraction`` < 1 is playout-cap randomisation as the connect4 config sets it (fast searches at
    search.fast_simulations): fewer simulations a move, smaller batches once the fast searches are done."""
    game = make_game("connect4")
    cfg = load(None, [f"--model.channels={channels}", f"--model.blocks={blocks}", f"--actors.games={games}",
                      f"--search.simulations={sims}", f"--search.full_search_fraction={full_fraction}",
                      f"--search.fast_simulations={load(resolve_config('connect4')).search.fast_simulations}"])
    model = build_model(game, channels, blocks).eval()
    # what an actor runs: "auto" is the CPU's own choice (int8 on VNNI without AMX), explicit cases are themselves
    int8 = runtime == "int8" or (dtype == "auto" and runs_int8("auto", runtime))
    dtype = actor_dtype("auto", runtime) if dtype == "auto" else dtype
    ev = NetworkEvaluator(model, dtype, "onnxruntime" if int8 else runtime, int8=int8)
    worker = SelfPlayWorker(game, ev, cfg, np.random.default_rng(0))
    for _ in range(3):  # warm up past the first moves and oneDNN's first-call setup
        worker.step(0)
    ev.refresh(model)  # as an actor does when weights arrive: int8 quantizes here, on the positions just evaluated
    ev.seconds, ev.positions, ev.calls = 0.0, 0, 0
    moves0, sims0 = worker.moves, worker.simulations
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        worker.step(0)
    wall = time.perf_counter() - start
    # the same network and batch, forward passes only: the ceiling for simulations/s
    planes = game.encode(worker.states)
    ev_only = NetworkEvaluator(model, dtype, "onnxruntime" if int8 else runtime, int8=int8)
    for _ in range(3):
        ev_only(planes)
    ev_only.refresh(model)
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < min(5.0, seconds / 2):
        ev_only(planes)
        n += 1
    forward_limit = n * len(planes) / (time.perf_counter() - t0)
    sims_per_s = (worker.simulations - sims0) / wall
    return {
        "net": f"{channels}x{blocks}", "parameters": count_parameters(model), "games_per_actor": games,
        "precision": "int8" if int8 else str(dtype or "fp32").replace("torch.", ""), "runtime": ev.runtime,
        "simulations_per_move": sims, "full_search_fraction": full_fraction, "seconds": round(wall, 1),
        "positions_per_s": (worker.moves - moves0) / wall,
        "simulations_per_s": sims_per_s,
        "network_evals_per_s": ev.positions / wall,
        "mean_batch": ev.positions / max(1, ev.calls),
        "outside_forward_share": 1 - ev.seconds / wall,
        "forward_only_evals_per_s": forward_limit,
        "sims_vs_forward_limit": sims_per_s / forward_limit,
        "vs_azg_default_512ch": sims_per_s / AZG_SIMS_PER_S["default-512ch"],
        "vs_azg_64ch": sims_per_s / AZG_SIMS_PER_S["64ch"],
    }


def fp32_isa(seconds: float, quick: bool) -> list[dict]:
    """Self-play without bf16 on one core, with this CPU's own instructions and held to AVX2, in eager torch and in
    ONNX Runtime (fp32 and int8): what an AVX2-only CPU's actors run. Each case in a fresh process (the ISA is fixed
    when torch loads), twice, interleaved; once under --quick, a smoke run of the path."""
    runs = []
    for isa, runtime in FP32_CASES * (1 if quick else 2):
        out = subprocess.run([sys.executable, "-m", "bench.run", "--fp32-case", str(seconds), "--fp32-runtime", runtime,
                              *(["--quick"] if quick else [])],
                             env={**os.environ, **(AVX2_ONLY_ENV if isa == "avx2" else {})},
                             capture_output=True, text=True, check=True)
        runs.append({"isa": isa, "case": runtime, **json.loads(out.stdout.splitlines()[-1])})
    rows = []
    for isa, runtime in FP32_CASES:
        mine = [r for r in runs if r["isa"] == isa and r["case"] == runtime]
        # the child's own figures (what it ran, ratios to alpha-zero-general included), averaged over its runs
        rows.append({"isa": isa, "runtime": mine[0]["runtime"], "precision": mine[0]["precision"],
                     "cpu_capability": mine[0]["cpu_capability"], "net": mine[0]["net"],
                     **{k: float(np.mean([r[k] for r in mine])) for k in
                        ("simulations_per_s", "forward_only_evals_per_s", "vs_azg_default_512ch", "vs_azg_64ch")}})
    return rows


def shipped_case() -> tuple[int, int, int, int, float]:
    """make train-local's self-play as connect4.yaml ships it: (channels, blocks, games, simulations, full share)."""
    cfg = load(resolve_config("connect4"))
    return (cfg.model.channels, cfg.model.blocks, cfg.actors.games, cfg.search.simulations,
            cfg.search.full_search_fraction)


def learner_throughput(channels: int, blocks: int, batch: int, seconds: float) -> dict:
    game = make_game("connect4")
    cfg = load(None, [f"--model.channels={channels}", f"--model.blocks={blocks}", f"--learner.batch_size={batch}",
                      f"--learner.min_replay={batch}"])
    precision = pick_precision(torch.device("cpu"))
    out = {"net": f"{channels}x{blocks}", "batch": batch}
    for name, p in (("auto", precision), ("fp32", Precision(torch.device("cpu"), None, False))):
        learner = Learner(cfg, game, p, DistInfo(), 0)
        rng = np.random.default_rng(0)
        states = game.initial_states(batch)  # a step costs the same whatever the positions hold
        policy = rng.dirichlet(np.ones(7), size=batch).astype(np.float32)
        b = {"states": states, "policy": policy, "z": np.zeros(batch, np.float32), "q": np.zeros(batch, np.float32)}
        learner.step(b)
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            learner.step(b)
            steps += 1
        out[f"samples_per_s_{name}"] = steps * batch / (time.perf_counter() - t0)
        out[f"precision_{name}"] = p.describe()
    return out


def timed_training(config: str, seconds: float, extra: list[str], ranks: int = 1) -> dict:
    """Train for ``seconds`` under `selfplay launch` with ``ranks`` local ranks; self-play positions/s of the whole run."""
    import re
    import socket
    import tempfile
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as run_dir:
        env = {**os.environ, "NNODES": "1", "NPROC_PER_NODE": str(ranks), "MASTER_PORT": str(port)}
        out = subprocess.run([sys.executable, "-m", "selfplay", "launch", "--config", config, f"--run.dir={run_dir}",
                              f"--run.max_minutes={seconds / 60}", "--eval.every_minutes=0", *extra], env=env,
                             capture_output=True, text=True, check=True).stdout
    done = re.findall(r"rank (\d+) finished at step (\d+).*?, (\d+) positions played here in ([\d.]+) s", out)
    wall = max(float(d[3]) for d in done)
    return {"positions_per_s": sum(int(d[2]) for d in done) / wall, "learner_steps": int(done[0][1]), "seconds": wall}


def rank_scaling(config: str, seconds: float, extra: tuple[str, ...] = ()) -> list[dict]:
    """Self-play positions/s of the whole machine with 1 and 2 local ranks (each: 1 actor + 1 learner)."""
    rows = []
    for ranks in (1, 2):
        rows.append({"ranks": ranks, **timed_training(config, seconds, ["--actors.count=1", *extra], ranks)})
        rows[-1]["speedup_vs_1_rank"] = rows[-1]["positions_per_s"] / rows[0]["positions_per_s"]
        print(f"scaling: {ranks} rank(s): {rows[-1]['positions_per_s']:.0f} positions/s, "
              f"{rows[-1]['learner_steps']} learner steps", flush=True)
    return rows


def inference_placement(config: str, seconds: float, extra: tuple[str, ...] = ()) -> list[dict]:
    """Whole-run positions/s with each actor running the net itself vs. the learner's device answering all leaves.

    On a GPU node the second is the point of leaf_server.py, for fp32 actors: where the CPU has bf16 both
    actor precisions are measured, since auto serves leaves only to fp32 ones (hardware.leaves_served_by_learner).
    On a CPU-only machine it shows what the round trips cost, since the learner's core then does every actor's
    forward passes.
    """
    device = "cuda" if torch.cuda.is_available() else "cpu"
    precisions = ["bf16", "fp32"] if device == "cuda" and cpu_has_native_bf16() else ["auto"]
    rows = []
    for precision in precisions:
        for mode in ("local", "learner"):
            rows.append({"inference": mode, "device": device, "actor_precision": precision,
                         **timed_training(config, seconds, [f"--actors.inference={mode}", f"--run.device={device}",
                                                            f"--actors.precision={precision}", *extra])})
            rows[-1]["vs_local"] = rows[-1]["positions_per_s"] / rows[-2 if mode == "learner" else -1]["positions_per_s"]
            print(f"inference {mode} ({device}, actors {precision}): {rows[-1]['positions_per_s']:.0f} positions/s, "
                  f"{rows[-1]['learner_steps']} learner steps", flush=True)
    return rows
