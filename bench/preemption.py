"""The Spot preemption budget, measured: SIGTERM -> the final checkpoint readable in the run's bucket.

GCE gives a Spot VM 30 seconds between the preemption notice and the stop (launch_contract.SPOT_NOTICE_SECONDS;
cloud.google.com/compute/docs/instances/spot, "Preemption process"). On the notice the VM shuts down, systemd
stops the agent, and the agent stops the trainer's container with `docker stop -t STOP_GRACE_SECONDS`
(gantry_agent.agent.Agent.stop_container): SIGTERM, and SIGKILL when the grace is spent. The trainer then stops
its actors, writes a checkpoint with its replay buffer and copies it to the bucket (selfplay/train.py).

Here the kit's CPU image runs as the agent runs it (host network, the run folder gs://.../runs/preempt on a GCS
server: fake-gcs-server, tests/gcs_server.py) at the default Connect Four config. Every trial resumes from the
bucket's newest checkpoint, whose replay buffer is full (the first trial's comes from --checkpoint, a checkpoint of
the default config that trained long enough: `make bench ARGS="--train-minutes 120"` leaves them in runs/), trains
until the learner has stepped past it, and is stopped exactly as the agent stops it; the clock runs from `docker
stop` until the new checkpoint is listed in the bucket, and the object is then read back and loaded.

    python -m bench.preemption --checkpoint runs/bench-20261127-044538-seed2   # 10 trials -> bench/results/
    python -m bench.preemption --checkpoint RUN --trials 3 --image gantry-trainer:test-cpu
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from launch_contract import SPOT_NOTICE_SECONDS, STOP_GRACE_SECONDS
from selfplay import checkpoint
from selfplay.config import LearnerConfig
from selfplay.errors import SelfplayError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the GCS server the tests run against
from gcs_server import gcs_server  # noqa: E402
from gcs_server import version as gcs_server_version  # noqa: E402

RESULTS = Path(__file__).parent / "results"
BUCKET = "preemption-bench"
RUN = f"gs://{BUCKET}/runs/preempt"
# the budget #44 holds the trials to, inside the notice's 30 s: what the VM's shutdown and the agent need besides
MEDIAN_BUDGET_S, MAX_BUDGET_S = 20.0, 25.0
PROGRESS = re.compile(r"^step (\d+) \|", re.M)


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=check)


def newest_step(gcs) -> int:
    steps = [int(n[len("ckpt-"):-len(".pt")]) for n in gcs.names(RUN) if re.fullmatch(r"ckpt-\d+\.pt", n)]
    return max(steps, default=-1)


def loaded(gcs, step: int) -> tuple[checkpoint.Checkpoint, int]:
    """The object read back through the API and loaded as the trainer would load it (a torn file fails here), and
    its size in bytes."""
    name = checkpoint.checkpoint_path("", step).name
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(gcs.read(f"{RUN}/{name}"))
        return checkpoint.load(path), path.stat().st_size


def trial(gcs, image: str, number: int) -> dict:
    resumed_from = newest_step(gcs)
    name = f"gantry-preempt-{uuid.uuid4().hex[:8]}"
    env = [f for key, value in gcs.environ.items() for f in ("-e", f"{key}={value}")]
    docker("run", "-d", "--name", name, "--init", "--network", "host", "--shm-size", "1g", *env, image,
           "--config", "connect4", f"--run.dir={RUN}", timeout=300)
    try:
        deadline = time.monotonic() + 300
        while True:  # the learner has stepped past the checkpoint it resumed from: the run is at full speed
            out = docker("logs", name, check=False)
            text = out.stdout + out.stderr
            if any(int(s) > resumed_from for s in PROGRESS.findall(text)):
                break
            if time.monotonic() > deadline or "Traceback" in text:
                raise SystemExit(f"trial {number}: the trainer did not resume and step within 300 s:\n{text[-3000:]}")
            time.sleep(1)
        before = newest_step(gcs)
        stopped: dict = {}

        def stop() -> None:  # the agent's own command (Agent.stop_container without --sync folders)
            stopped["result"] = docker("stop", "-t", str(STOP_GRACE_SECONDS), name, timeout=STOP_GRACE_SECONDS + 60)
            stopped["at"] = time.monotonic()

        signalled = time.monotonic()
        stopper = threading.Thread(target=stop)
        stopper.start()
        while (step := newest_step(gcs)) <= before:
            if time.monotonic() - signalled > SPOT_NOTICE_SECONDS + 30:
                stopper.join()
                raise SystemExit(f"trial {number}: no new checkpoint in {RUN} {SPOT_NOTICE_SECONDS + 30} s after "
                                 f"SIGTERM:\n{docker('logs', name, check=False).stderr[-3000:]}")
            time.sleep(0.05)
        listed = time.monotonic() - signalled
        stopper.join()
        state = docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
        saved, size = loaded(gcs, step)
        row = {"trial": number, "resumed_from_step": resumed_from, "final_step": step,
               "sigterm_to_readable_s": round(listed, 2), "sigterm_to_exit_s": round(stopped["at"] - signalled, 2),
               "exit_code": int(state), "replay_positions": int(len(saved.replay["z"])),
               "checkpoint_mb": round(size / 1e6, 1)}
        print(f"trial {number}: SIGTERM -> checkpoint step {step} readable in the bucket in "
              f"{row['sigterm_to_readable_s']} s (container exited {row['exit_code']} after "
              f"{row['sigterm_to_exit_s']} s), {row['replay_positions']} replay positions, {row['checkpoint_mb']} MB",
              flush=True)
        return row
    finally:
        docker("rm", "-f", name, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True,
                    help="a checkpoint of the default Connect Four config with a full replay buffer, or its run folder")
    ap.add_argument("--trials", type=int, default=10, help="trials, each from the previous one's checkpoint (>= 1)")
    ap.add_argument("--image", default="gantry-trainer:test-cpu", help="the kit's CPU image (make test builds this tag)")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error(f"--trials {args.trials}: pass 1 or more (each trial is one preemption)")
    try:
        start = checkpoint.resolve(args.checkpoint)
        saved = checkpoint.load(start)
    except SelfplayError as e:  # one line that names the fix, as the trainer's own command line says it
        raise SystemExit(str(e)) from None
    capacity = LearnerConfig().replay_capacity
    if len(saved.replay["z"]) < capacity:
        raise SystemExit(f"{start}: its replay buffer holds {len(saved.replay['z'])} of {capacity} positions; pass a "
                         f"checkpoint of a run that trained longer (about 16 minutes fill it on 2 cores)")
    image_id = docker("image", "inspect", "-f", "{{.Id}}", args.image, check=False)
    if image_id.returncode:
        raise SystemExit(f"no image {args.image} in the engine: `make test` or `make build-train ARGS=--no-push` "
                         f"builds one, or pass --image")
    from bench.run import machine

    with gcs_server(BUCKET) as gcs:
        gcs.write(f"{RUN}/{start.name}", start.read_bytes())
        rows = [trial(gcs, args.image, i + 1) for i in range(args.trials)]
    times = [r["sigterm_to_readable_s"] for r in rows]
    summary = {"min_s": min(times), "median_s": statistics.median(times), "max_s": max(times),
               "median_budget_s": MEDIAN_BUDGET_S, "max_budget_s": MAX_BUDGET_S,
               "within_budget": statistics.median(times) <= MEDIAN_BUDGET_S and max(times) <= MAX_BUDGET_S}
    report = {"machine": machine(), "when": time.strftime("%Y%m%d-%H%M%S"), "image": args.image,
              "image_id": image_id.stdout.strip(), "gcs_server": f"fake-gcs-server {gcs_server_version()}",
              "stop": f"docker stop -t {STOP_GRACE_SECONDS}", "started_from": str(start), "trials": rows,
              "sigterm_to_readable": summary}
    out = RESULTS / f"preemption-{report['when']}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"SIGTERM -> final checkpoint readable, {len(rows)} trials: min {summary['min_s']} s, median "
          f"{summary['median_s']} s, max {summary['max_s']} s (budget: median <= {MEDIAN_BUDGET_S:.0f}, max <= "
          f"{MAX_BUDGET_S:.0f}; {'met' if summary['within_budget'] else 'MISSED'})\nwrote {out}")
    return 0 if summary["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
