"""The Spot preemption budget, measured through the one run store: SIGTERM -> the final checkpoint readable in the
run's bucket.

GCE gives a Spot VM 30 seconds between the preemption notice and the stop (launch_contract.SPOT_NOTICE_SECONDS;
cloud.google.com/compute/docs/instances/spot, "Preemption process"). On the notice the VM shuts down, systemd stops
the agent, and the agent stops the program's container (gantry_agent.agent.Agent.stop_container): `docker stop -t
sync_stop_grace()` (SIGTERM, SIGKILL when the grace is spent), then the final copy of the launch's --sync folders,
cut off after SYNC_FINAL_SECONDS. The trainer writes its checkpoint, with its replay buffer, into its local run
folder (the kit's gantry.yaml: --run.dir=trainer, sync: [trainer]); the agent's copy is what puts it in the bucket.

Here the kit's CPU image runs as a node's agent runs it, with the agent's own code: the `docker run` of the launch's
RunSpec (containers.docker_run_args, host network, the run folder handed to the image's user), its --sync folders
restored from the bucket before the start and copied after the stop (outputs.RunOutputs), on a GCS server
(fake-gcs-server, packages/local_cloud/storage.py), at the default Connect Four config. Every trial resumes from the bucket's
newest checkpoint on a fresh node folder, whose replay buffer is full (the first trial's comes from --checkpoint, a
checkpoint of the default config that trained long enough: `make bench ARGS="--train-minutes 120"` leaves them in
runs/, and so does `make train-local ARGS=--run.max_minutes=17`), trains until the learner has stepped past it, gets
the periodic copy the agent makes every sync_seconds, and is stopped exactly as the agent stops it at a shutdown;
the clock runs from `docker stop` until the new checkpoint is listed in the bucket, and the object is then read
back and loaded.

    python -m bench.preemption --checkpoint runs/local                  # 10 trials -> bench/results/
    python -m bench.preemption --checkpoint RUN --trials 3 --image gantry-trainer:test-cpu
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from gantry.launches import program_file
from gantry_agent.containers import Docker, docker_run_args
from gantry_agent.outputs import RunOutputs
from gantry_agent.settings import Settings
from launch_contract import SPOT_NOTICE_SECONDS, SYNC_FINAL_SECONDS, RunSpec, sync_stop_grace, sync_url
from selfplay import checkpoint
from selfplay.config import LearnerConfig
from selfplay.errors import SelfplayError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the GCS server the tests run against
from local_cloud.storage import gcs_server  # noqa: E402
from local_cloud.storage import version as gcs_server_version  # noqa: E402

RESULTS = Path(__file__).parent / "results"
BUCKET = "preemption-bench"
RUN = f"gs://{BUCKET}/runs/preempt"
KIT = program_file.load(program_file.KIT_ROOT)  # the kit's trainer as its gantry.yaml declares it
(FOLDER,) = KIT.sync
STORE = sync_url(RUN, 0, FOLDER)  # node 0's run folder in the bucket, where a resumed node restores it from
# the budget the trials are held to, inside the notice's 30 s: what the VM's shutdown and the agent need besides
MEDIAN_BUDGET_S, MAX_BUDGET_S = 10.0, 20.0
PROGRESS = re.compile(r"^step (\d+) \|", re.M)


def newest_step(gcs) -> int:
    steps = [int(n[len("ckpt-"):-len(".pt")]) for n in gcs.names(STORE) if re.fullmatch(r"ckpt-\d+\.pt", n)]
    return max(steps, default=-1)


def loaded(gcs, step: int) -> tuple[checkpoint.Checkpoint, int]:
    """The object read back through the API and loaded as the trainer would load it (a torn file fails here), and
    its size in bytes."""
    name = checkpoint.checkpoint_path("", step).name
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(gcs.read(f"{STORE}/{name}"))
        return checkpoint.load(path), path.stat().st_size


def trial(gcs, image: str, number: int, work: Path) -> dict:
    resumed_from = newest_step(gcs)
    spec = RunSpec(run_id="preempt", image=image, node_rank=0, nnodes=1, master_addr="127.0.0.1", command=True,
                   args=(*KIT.command, "--config", "connect4"), sync=KIT.sync, stats_file=KIT.stats, run_dir=RUN,
                   launched_at=f"{time.time():.0f}")
    settings = Settings({"STORAGE_EMULATOR_HOST": gcs.url, "GANTRY_AGENT_SHM_SIZE": "1g"})
    docker = Docker(settings.docker)
    run_folder = str(work / f"node-{number}")  # a fresh disk: the run folder comes back from the bucket
    outputs = RunOutputs(spec, run_folder, docker, lambda: "", settings.storage_url, lambda line: print(f"  agent: {line}"))
    outputs.restore()
    docker.prepare_run_folder(run_folder, image)
    docker.checked(*docker_run_args(spec, run_folder, settings, docker.workdir(image)), timeout=300)
    name = spec.container
    try:
        deadline = time.monotonic() + 300
        while True:  # the learner has stepped past the checkpoint it resumed from: the run is at full speed
            out = docker("logs", name)
            text = out.stdout + out.stderr
            if any(int(s) > resumed_from for s in PROGRESS.findall(text)):
                break
            if time.monotonic() > deadline or "Traceback" in text:
                raise SystemExit(f"trial {number}: the trainer did not resume and step within 300 s:\n{text[-3000:]}")
            time.sleep(1)
        outputs.push("the copy every sync_seconds")  # the agent's last periodic copy before the notice
        before = newest_step(gcs)
        grace = sync_stop_grace(settings.stop_grace_seconds, settings.sync_final_seconds)
        stopped: dict = {}

        def stop() -> None:  # Agent.stop_container at a shutdown: SIGTERM and the grace, then the final copy
            stopped["result"] = docker("stop", "-t", str(grace), name, timeout=grace + 60)
            stopped["exited"] = time.monotonic()
            outputs.final(time.monotonic() + SYNC_FINAL_SECONDS)

        signalled = time.monotonic()
        stopper = threading.Thread(target=stop)
        stopper.start()
        while (step := newest_step(gcs)) <= before:
            if time.monotonic() - signalled > SPOT_NOTICE_SECONDS + 30:
                stopper.join()
                raise SystemExit(f"trial {number}: no new checkpoint in {STORE} {SPOT_NOTICE_SECONDS + 30} s after "
                                 f"SIGTERM:\n{docker('logs', name).stderr[-3000:]}")
            time.sleep(0.05)
        listed = time.monotonic() - signalled
        stopper.join()
        state = docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
        saved, size = loaded(gcs, step)
        row = {"trial": number, "resumed_from_step": resumed_from, "final_step": step,
               "sigterm_to_readable_s": round(listed, 2), "sigterm_to_exit_s": round(stopped["exited"] - signalled, 2),
               "exit_code": int(state), "replay_positions": int(len(saved.replay["z"])),
               "checkpoint_mb": round(size / 1e6, 1)}
        print(f"trial {number}: SIGTERM -> checkpoint step {step} readable in the bucket in "
              f"{row['sigterm_to_readable_s']} s (container exited {row['exit_code']} after "
              f"{row['sigterm_to_exit_s']} s), {row['replay_positions']} replay positions, {row['checkpoint_mb']} MB",
              flush=True)
        return row
    finally:
        docker("rm", "-f", name)


def tiled(saved: checkpoint.Checkpoint, capacity: int) -> bytes:
    """The checkpoint with its replay buffer repeated up to ``capacity`` positions, as the trainer would save it."""
    import numpy as np
    import torch

    saved.replay = {k: torch.from_numpy(np.resize(v.numpy(), (capacity, *v.shape[1:]))) if isinstance(v, torch.Tensor)
                    else v for k, v in saved.replay.items()}
    with tempfile.TemporaryDirectory() as tmp:
        return checkpoint.save(tmp, saved).read_bytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True,
                    help="a checkpoint of the default Connect Four config with a full replay buffer, or its run folder")
    ap.add_argument("--trials", type=int, default=10, help="trials, each from the previous one's checkpoint (>= 1)")
    ap.add_argument("--image", default="gantry-trainer:test-cpu", help="the kit's CPU image (make test builds this tag)")
    ap.add_argument("--tile-replay", action="store_true", help="fill a partly full replay buffer to capacity by "
                    "repeating its positions: a checkpoint the size of a full one, from a run too short to fill it")
    args = ap.parse_args()
    if args.trials < 1:
        ap.error(f"--trials {args.trials}: pass 1 or more (each trial is one preemption)")
    try:
        start = checkpoint.resolve(args.checkpoint)
        saved = checkpoint.load(start)
    except SelfplayError as e:  # one line that names the fix, as the trainer's own command line says it
        raise SystemExit(str(e)) from None
    capacity = LearnerConfig().replay_capacity
    held = len(saved.replay["z"])
    if held < capacity and not args.tile_replay:
        raise SystemExit(f"{start}: its replay buffer holds {held} of {capacity} positions; pass a checkpoint of a "
                         f"run that trained longer (`make bench ARGS=\"--train-minutes 120\"`), or --tile-replay")
    first = start.read_bytes() if held >= capacity else tiled(saved, capacity)
    image_id = Docker(["docker"])("image", "inspect", "-f", "{{.Id}}", args.image)
    if image_id.returncode:
        raise SystemExit(f"no image {args.image} in the engine: `make test` or `make build-train ARGS=--no-push` "
                         f"builds one, or pass --image")
    from bench.run import machine

    with gcs_server(BUCKET) as gcs, tempfile.TemporaryDirectory(prefix="gantry-preempt-") as work:
        gcs.write(f"{STORE}/{start.name}", first)
        rows = [trial(gcs, args.image, i + 1, Path(work)) for i in range(args.trials)]
    times = [r["sigterm_to_readable_s"] for r in rows]
    summary = {"min_s": min(times), "median_s": round(statistics.median(times), 2), "max_s": max(times),
               "median_budget_s": MEDIAN_BUDGET_S, "max_budget_s": MAX_BUDGET_S,
               "within_budget": statistics.median(times) <= MEDIAN_BUDGET_S and max(times) <= MAX_BUDGET_S}
    report = {"machine": machine(), "when": time.strftime("%Y%m%d-%H%M%S"), "image": args.image,
              "image_id": image_id.stdout.strip(), "gcs_server": f"fake-gcs-server {gcs_server_version()}",
              "stop": f"docker stop -t {sync_stop_grace()}, then the agent's final copy (RunOutputs.final)",
              "store": STORE, "started_from": str(start),
              "replay_tiled_from": None if held >= capacity else held, "trials": rows,
              "sigterm_to_readable": summary}
    out = RESULTS / f"preemption-{report['when']}.json"
    out.write_text(json.dumps(report, indent=2))
    print(f"SIGTERM -> final checkpoint readable, {len(rows)} trials: min {summary['min_s']} s, median "
          f"{summary['median_s']} s, max {summary['max_s']} s (budget: median <= {MEDIAN_BUDGET_S:.0f}, max <= "
          f"{MAX_BUDGET_S:.0f}; {'met' if summary['within_budget'] else 'MISSED'})\nwrote {out}")
    return 0 if summary["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
