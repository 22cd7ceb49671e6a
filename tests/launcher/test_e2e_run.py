"""End to end on one machine: `gantry run` -> two node agents start two trainer ranks -> `gantry status`
shows the steps -> `gantry stop` checkpoints to the bucket -> `gantry run --resume` continues from
that step.

Everything a VM has is here for real except Google: the fake Compute API (driven by the real
google-cloud-compute client), one fake metadata server per node sharing that node's instance record,
the real agent (packages/gantry/agent.py) in its own process per node, the fake docker CLI that runs
the trainer image's entry command (`python -m selfplay launch`) as a local process, torchrun's
rendezvous on 127.0.0.1, and a file:// folder as the bucket (the same fsspec mirror as gs://).
"""

from __future__ import annotations

import re
import socket
from contextlib import ExitStack

import pytest
from agent_helpers import Node, wait_until
from fake_metadata import FakeMetadata
from gantry.status import ExitStatus
from launcher_helpers import needs_terraform
from runs_helpers import add_nodes, apply_outputs_module, cluster_outputs

pytestmark = [pytest.mark.slow, pytest.mark.terraform, needs_terraform, pytest.mark.timeout(900)]
NAMES = ["gantry-node-0", "gantry-node-1"]
TRAINER = ["--actors.count=1", "--run.log_every_seconds=1", "--dist.timeout_s=120",
           "--run.checkpoint_every_minutes=10"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def checkpoint_steps(run_dir) -> list[int]:
    return sorted(int(m.group(1)) for p in run_dir.glob("ckpt-*.pt") if (m := re.match(r"ckpt-(\d+)\.pt", p.name)))


def test_run_status_stop_and_resume_across_two_nodes(cli, fake, deployment, tmp_path):
    apply_outputs_module(deployment.infra, cluster_outputs(NAMES, master="127.0.0.1"))
    vms = add_nodes(fake, NAMES)
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    environ = {"GANTRY_BUCKET_URL": f"file://{bucket}"}
    port = str(free_port())
    run_dir = bucket / "runs" / "e2e"
    with ExitStack() as stack:
        nodes = []
        for rank, vm in enumerate(vms):
            metadata = stack.enter_context(FakeMetadata(instance=vm))
            node = Node(tmp_path / f"vm{rank}", metadata, GANTRY_AGENT_STOP_GRACE_SECONDS="60").start()
            stack.callback(node.kill_containers)
            stack.callback(node.stop)
            vm["serialPortFile"] = str(node.serial)
            nodes.append(node)

        started = cli("run", "--detach", "--run-id", "e2e", "--config", "tictactoe", "--master-port", port,
                      "--nproc-per-node", "1", "--", "--run.max_steps=100000", *TRAINER, environ=environ)
        assert started.status == ExitStatus.OK, started.output
        wait_until(lambda: all(n.report().get("state") == "running" for n in nodes), timeout=60,
                   what="both agents to run the trainer")
        wait_until(lambda: (nodes[0].report().get("step") or 0) >= 20, timeout=300,
                   what=f"training progress on rank 0; its output:\n{nodes[0].output()[-3000:]}")

        status = cli("status", environ=environ)
        assert status.status == ExitStatus.OK, status.output
        row0, row1 = status.stdout.splitlines()[1:3]
        assert row0.split()[:4] == ["0", "gantry-node-0", "running", "e2e"] and int(row0.split()[4]) >= 20
        assert row1.split()[:4] == ["1", "gantry-node-1", "running", "e2e"]
        logs = cli("logs", environ=environ)
        assert "launch: node 0/2" in logs.stdout and re.search(r"\bstep \d+ \|", logs.stdout)

        stopped = cli("stop", "-y", "--timeout", "180", environ=environ)
        assert stopped.status == ExitStatus.OK, stopped.output + nodes[0].output()[-3000:]
        steps = checkpoint_steps(run_dir)
        assert steps and steps[-1] >= 20, f"no checkpoint in the bucket after stop: {list(run_dir.iterdir())}"
        stopped_at = steps[-1]
        assert (run_dir / "stats.jsonl").is_file()

        resumed = cli("run", "--detach", "--resume", "e2e", "--config", "tictactoe", "--master-port", port,
                      "--nproc-per-node", "1", "--", f"--run.max_steps={stopped_at + 10}", *TRAINER,
                      environ=environ)
        assert resumed.status == ExitStatus.OK, resumed.output
        wait_until(lambda: all(n.report().get("state") == "finished" for n in nodes), timeout=300,
                   what=f"the resumed run to finish; rank 0 said:\n{nodes[0].output()[-3000:]}")
        assert f"at step {stopped_at} " in nodes[0].output()  # "resumed from ckpt-... at step N (...)"
        assert checkpoint_steps(run_dir)[-1] == stopped_at + 10
        assert f"rank 1 finished at step {stopped_at + 10}" in nodes[1].output()

        fetched = cli("fetch", "e2e", environ=environ)
        assert fetched.status == ExitStatus.OK, fetched.output
        assert (deployment.root / "runs" / "e2e" / f"ckpt-{stopped_at + 10:09d}.pt").is_file()
