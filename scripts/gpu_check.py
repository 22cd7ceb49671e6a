#!/usr/bin/env python3
"""The GPU path proven on the GPU machine at hand, from a fresh clone: one JSON on stdout, exit 1 if a check failed.

    python3 scripts/gpu_check.py                    # .venv with docker/torch.json's CUDA torch, the CUDA image built
    python3 scripts/gpu_check.py --python python3   # an interpreter that already has CUDA torch and the trainer's
                                                    # dependencies (a Deep Learning VM, a CUDA container): no install
    python3 scripts/gpu_check.py --image IMAGE      # a CUDA image already built or `docker load`ed: no build
    python3 scripts/gpu_check.py --device cpu --python .venv/bin/python --checks torch,train,resume
                                                    # the same checks on CPUs over gloo (what make test runs)

The checks, each an entry of the JSON's "checks" with its seconds and figures (each runs even when one before it
failed; all but torch need a torch that sees the device):
  torch   the CUDA build of torch sees every GPU: names, compute capability, memory, the driver's CUDA
  image   the CUDA image (`gantry build --gpu --no-push`, or --image) sees the driver: its start-up guard
          (docker/cuda_check.py) passes under `docker run --gpus all`, and its trainer trains 20 steps there
  train   `selfplay launch`: one rank per GPU over nccl, the learner in bf16 (compute capability 8+) or fp16, the
          actors' leaves served from the GPU; every rank ends with the same weights (the group all-reduced them);
          steps/s, simulations/s and each GPU's peak memory (nvidia-smi, sampled every second)
  resume  the same run folder launched again reloads the newest checkpoint and trains on to twice the steps
  tests   the CUDA tests (pytest -m gpu)
  bench   bench.run with a few seconds a case (what `make bench` runs): its JSON lands in bench/results/
Record the figures in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHECKS = ("torch", "image", "train", "resume", "tests", "bench")
# The trainer on the device: tic-tac-toe, one actor per rank (a rank per GPU would otherwise take every core each).
TRAINER = ["--config", "tictactoe", "--actors.count=1", "--eval.every_minutes=0", "--run.log_every_seconds=2"]
DEVICE_FLAGS = {"cuda": ["--run.device=cuda", "--actors.inference=learner", "--dist.backend=nccl"],
                "cpu": ["--run.device=cpu", "--dist.backend=gloo"]}


def say(line: str) -> None:
    print(f"gpu_check: {line}", file=sys.stderr, flush=True)


def run(argv: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """A step's command, its output shown as it is read back (stderr), never a hang past ``timeout``."""
    say("$ " + " ".join("'...'" if "\n" in word else word for word in argv))
    try:
        done = subprocess.run(argv, cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as late:
        return subprocess.CompletedProcess(argv, 124, late.stdout or "", f"timed out after {timeout:.0f} s")
    sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
    return done


def last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


class GpuMemory:
    """Each GPU's peak memory in MiB while a step runs, from nvidia-smi once a second (empty without nvidia-smi)."""

    def __init__(self):
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(1.0):
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10, check=False).stdout
            except (OSError, subprocess.TimeoutExpired):
                return
            for line in out.splitlines():
                index, used = (int(part) for part in line.split(","))
                self.peak[index] = max(used, self.peak.get(index, 0))

    def __enter__(self):
        if shutil.which("nvidia-smi"):
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()


def torch_facts(python: str, device: str) -> dict:
    """What the interpreter's torch sees: its version, CUDA build, and each GPU (or, on --device cpu, the ranks)."""
    probe = """
import json, torch
gpus = [dict(name=torch.cuda.get_device_name(i), capability=".".join(map(str, torch.cuda.get_device_capability(i))),
             memory_gb=round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1))
        for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
print(json.dumps(dict(torch=torch.__version__, cuda=torch.version.cuda, gpus=gpus)))
"""
    done = run([python, "-c", probe], timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{python} cannot import torch: {last_line(done)}")
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    if device == "cuda" and not facts["gpus"]:
        raise RuntimeError(f"torch {facts['torch']} sees no CUDA device (its CUDA build: {facts['cuda']}): check "
                           "the driver (nvidia-smi) and that this is the CUDA build of torch")
    return facts


def ranks_of(facts: dict, device: str) -> int:
    return len(facts["gpus"]) if device == "cuda" else 2  # on CPUs two ranks still form a group


def launch(python: str, run_dir: Path, device: str, ranks: int, steps: int) -> tuple[subprocess.CompletedProcess, dict]:
    """`selfplay launch` with one rank per GPU to ``steps`` in ``run_dir``; its figures from stats.jsonl."""
    env = {"NPROC_PER_NODE": str(ranks), "PYTHONPATH": str(REPO / "packages")}
    with GpuMemory() as memory:
        done = run([python, "-m", "selfplay", "launch", *TRAINER, *DEVICE_FLAGS[device], f"--run.dir={run_dir}",
                    f"--run.max_steps={steps}"], timeout=900, env=env)
    records = []
    stats = run_dir / "stats.jsonl"
    for line in (stats.read_text().splitlines() if stats.exists() else []):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    # each pace from every progress record: self-play's need not share a window with a learner step (a 20-step run
    # can have one, in which no actor reported)
    trained = [r for r in records if r.get("kind") == "train"]
    figures = {"steps_per_s": round(max((r.get("charts/learner_steps_per_s") or 0 for r in trained), default=0), 2),
               "simulations_per_s": round(max((r.get("charts/simulations_per_s") or 0 for r in trained), default=0))}
    if memory.peak:
        figures["gpu_memory_peak_mib"] = [memory.peak[i] for i in sorted(memory.peak)]
    return done, figures


def check_training(done: subprocess.CompletedProcess, device: str, ranks: int, steps: int) -> str | None:
    """What a good launch printed, or why it was not one."""
    out = done.stdout + done.stderr
    if done.returncode != 0:
        return f"exit status {done.returncode}: {last_line(done)}"
    learner = re.search(r"learner (\w+)/(\w+)", out)
    if not learner or learner.group(1) != device:
        return f"the learner did not run on {device}: {learner.group(0) if learner else 'no learner line'}"
    if device == "cuda" and learner.group(2) not in ("bf16", "fp16"):
        return f"the learner trained in {learner.group(2)}, not bf16 or fp16"
    if device == "cuda" and "self-play leaves are evaluated on the learner's cuda" not in out:
        return "the actors' leaves were not served from the GPU"
    finished = re.findall(r"rank (\d+) finished at step (\d+), weights checksum (\S+),", out)
    if sorted(int(rank) for rank, _, _ in finished) != list(range(ranks)):
        return f"{len(finished)} of {ranks} ranks finished"
    if {int(step) for _, step, _ in finished} != {steps} or len({checksum for *_, checksum in finished}) != 1:
        return f"the ranks ended apart: {finished}"
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", help="an interpreter with torch and the trainer's dependencies (default: make "
                                     "install-dev with docker/torch.json's CUDA torch, then .venv/bin/python)")
    ap.add_argument("--image", help="a CUDA image already here (default: build it with gantry build --gpu --no-push)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: rehearse the checks on CPUs over gloo, with two ranks")
    ap.add_argument("--checks", default=",".join(CHECKS), help=f"which to run, of {','.join(CHECKS)}")
    ap.add_argument("--steps", type=int, default=200, help="learner steps of the train check (resume doubles them)")
    args = ap.parse_args(argv)
    args.wanted = [name.strip() for name in args.checks.split(",") if name.strip()]
    if unknown := sorted(set(args.wanted) - set(CHECKS)):
        ap.error(f"--checks {','.join(unknown)}: no such check; choose from {','.join(CHECKS)}")
    if args.steps < 1:
        ap.error(f"--steps {args.steps}: give a number of learner steps of at least 1")
    return args


class Checks:
    """The checks, each a method named as CHECKS names it, that returns None or what went wrong and adds its figures
    to its JSON entry. They share the interpreter, torch's facts (None until the torch check has seen the device)
    and the run folder that the train check writes and the resume check resumes."""

    def __init__(self, args: argparse.Namespace, python: str, run_dir: Path):
        self.args, self.python, self.run_dir = args, python, run_dir
        self.facts: dict | None = None

    def entry(self, name: str) -> dict:
        """Run one check: its JSON entry, with ok, seconds and (when it failed) the problem; one line said."""
        began = time.monotonic()
        entry: dict = {"name": name}
        try:
            if name != "torch" and self.facts is None:
                raise RuntimeError("skipped: torch does not see the device (the torch check)")
            problem = getattr(self, name)(entry)
        except RuntimeError as error:
            problem = str(error)
        except Exception as error:  # noqa: BLE001 (a check that breaks is a failed check: the JSON still comes out)
            problem = f"{type(error).__name__}: {error}"
        entry.update(ok=problem is None, seconds=round(time.monotonic() - began, 1))
        if problem:
            entry["problem"] = problem
        say(f"{name}: {'ok' if problem is None else 'FAILED: ' + problem}")
        return entry

    def torch(self, entry: dict) -> str | None:
        self.facts = torch_facts(self.python, self.args.device)
        entry.update(self.facts)
        return None

    def image(self, entry: dict) -> str | None:
        image = self.args.image
        if image is None:
            done = run([self.python, "-m", "gantry", "build", "--gpu", "--no-push"], timeout=3600)
            built = re.search(r"^gantry: built (\S+) ", done.stdout, flags=re.M)  # gantry.cli.build's summary line
            if done.returncode != 0 or not built:
                return f"gantry build --gpu: {last_line(done)}"
            image = built.group(1)
        entry["image"] = image
        guard = run(["docker", "run", "--rm", "--gpus", "all", image, "python", "/opt/gantry/cuda_check.py"],
                    timeout=600)
        entry["cuda_check"] = last_line(guard)
        if guard.returncode != 0:
            return f"the image's cuda_check.py: {last_line(guard)}"
        trained = run(["docker", "run", "--rm", "--gpus", "all", "--shm-size", "1g", image, *TRAINER,
                       "--run.dir=/tmp/run", "--run.max_steps=20"], timeout=900)
        return None if trained.returncode == 0 else f"the image's trainer: {last_line(trained)}"

    def train(self, entry: dict) -> str | None:
        steps, device = self.args.steps, self.args.device
        ranks = ranks_of(self.facts, device)
        done, figures = launch(self.python, self.run_dir, device, ranks, steps)
        entry.update(ranks=ranks, steps=steps, **figures)
        return check_training(done, device, ranks, steps)

    def resume(self, entry: dict) -> str | None:
        if not list(self.run_dir.glob("ckpt-*.pt")):
            return "no checkpoint to resume from (the train check)"
        steps, device = 2 * self.args.steps, self.args.device
        ranks = ranks_of(self.facts, device)
        done, figures = launch(self.python, self.run_dir, device, ranks, steps)
        resumed = re.search(r"resumed from \S+ at step (\d+)", done.stdout + done.stderr)
        entry.update(resumed_at=int(resumed.group(1)) if resumed else None, **figures)
        if not resumed:
            return f"the relaunch did not reload the checkpoint: {last_line(done)}"
        return check_training(done, device, ranks, steps)

    def tests(self, entry: dict) -> str | None:
        done = run([self.python, "-m", "pytest", "-p", "no:cacheprovider", "-m", "gpu", "-q", "tests/integration",
                    "tests/unit", "tests/docker/test_cuda_check.py"], timeout=1800)
        entry["summary"] = last_line(done)
        return None if done.returncode == 0 else f"pytest -m gpu: {last_line(done)}"

    def bench(self, entry: dict) -> str | None:
        # two ranks on one GPU: not a layout nccl takes
        scaling = "30" if self.facts and len(self.facts["gpus"]) > 1 else "0"
        done = run([self.python, "-m", "bench.run", "--seconds", "5", "--scaling-seconds", scaling,
                    "--placement-seconds", "30"], timeout=3600, env={"PYTHONPATH": str(REPO / "packages")})
        written = re.findall(r"bench/results/\S+\.json", done.stdout + done.stderr)
        entry["results"] = written[-1] if written else None
        return None if done.returncode == 0 else last_line(done)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict = {"device": args.device, "checks": []}
    python = args.python
    if python is None:  # make's TORCH_SPEC replaces a CPU torch already in .venv: `make install-dev` alone keeps it
        pins = json.loads((REPO / "docker" / "torch.json").read_text())
        done = run(["make", "install-dev", f"TORCH_SPEC=torch=={pins['torch']}"], timeout=1800)
        python = str(REPO / ".venv" / "bin" / "python")
        report["install"] = "ok" if done.returncode == 0 else last_line(done)
    run_dir = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    checks = Checks(args, python, run_dir)
    try:
        report["checks"] = [checks.entry(name) for name in CHECKS if name in args.wanted]
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    report["failed"] = [entry["name"] for entry in report["checks"] if not entry["ok"]]
    report["ok"] = not report["failed"] and report.get("install", "ok") == "ok"
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
