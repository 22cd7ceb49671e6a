"""Running the real node agent (packages/gantry_agent, `python3 -m gantry_agent`) as a process against fake_metadata and
fake_docker: what a VM would do, on this machine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from checkout import REPO
from launch_contract import RunSpec

HERE = Path(__file__).resolve().parent
PACKAGES = REPO / "packages"  # where `-m gantry_agent` finds the package and the launch contract, as on a VM
FAKE_DOCKER = HERE / "fake_docker.py"
STUB_TRAINER = HERE / "stub_trainer.py"


# A hang guard, not a pace: waiting costs only what the condition takes. 120 s because these processes start under
# the load of make test's other workers, and inside the dev container under two suites at once: the landing CI of
# 2026-11-27 waited 30 s for a stub trainer's third step there, and failed.
def wait_until(predicate, timeout: float = 120.0, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Node:
    """One simulated VM: a fake metadata server (given), a fake docker state folder, an agent process."""

    def __init__(self, root: Path, metadata, entrypoint: list[str] | None = None, **settings: str):
        self.root, self.metadata = root, metadata
        root.mkdir(parents=True, exist_ok=True)
        self.docker_state = root / "docker"
        self.serial = root / "serial.log"
        self.poweroff_marker = root / "powered-off"
        self.agent_log = root / "agent.log"
        self.environ = {k: v for k, v in os.environ.items() if not k.startswith("GANTRY_")}
        self.environ.update({
            "GANTRY_METADATA_URL": metadata.url,
            "GANTRY_AGENT_DOCKER": f"{sys.executable} {FAKE_DOCKER}",
            "FAKE_DOCKER_STATE": str(self.docker_state),
            "GANTRY_AGENT_POWEROFF": f"touch {self.poweroff_marker}",
            "GANTRY_AGENT_SERIAL": str(self.serial),
            "GANTRY_AGENT_LOG_FILE": str(self.agent_log),
            "GANTRY_AGENT_STATE_DIR": str(root / "var"),
            "GANTRY_REGISTRY_HOST": "us-central1-docker.pkg.dev",
            "GANTRY_AGENT_WATCH_SECONDS": "1",  # one loop a second: crashes and limits are seen sooner
            "GANTRY_AGENT_RESTART_SECONDS": "0.25",
            "GANTRY_AGENT_HEARTBEAT_SECONDS": "5",
            "GANTRY_AGENT_REPORTS_PER_MINUTE": "60",
            "GANTRY_AGENT_REPORT_BURST": "3",
            "GANTRY_IDLE_SHUTDOWN_MINUTES": "0",
            "GANTRY_AGENT_STOP_GRACE_SECONDS": "20",
            # A TPU VM's agent stops its node through the Cloud TPU API: never Google's from a test (a closed port
            # unless the test serves fake_googleapis).
            "GANTRY_AGENT_TPU_URL": "http://127.0.0.1:9",
        })
        if entrypoint:
            self.environ["FAKE_DOCKER_ENTRYPOINT"] = " ".join(entrypoint)
        self.environ.update(settings)
        self.process: subprocess.Popen | None = None

    def start(self) -> Node:
        self.stdout = open(self.root / "agent.stdout", "a")  # noqa: SIM115 (closed in stop())
        self.process = subprocess.Popen([sys.executable, "-u", "-m", "gantry_agent"], env=self.environ, cwd=PACKAGES,
                                        stdout=self.stdout, stderr=subprocess.STDOUT)
        return self

    def stop(self, sig=signal.SIGTERM, timeout: float = 60) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        finally:
            self.stdout.close()

    def kill_containers(self) -> None:
        """What a reboot does to the trainer: gone without a word."""
        for path in self.docker_state.glob("*.json"):
            data = json.loads(path.read_text())
            if data.get("supervisor"):
                try:
                    os.killpg(data["supervisor"], signal.SIGKILL)
                except OSError:
                    pass

    def report(self) -> dict:
        raw = self.metadata.guest_attributes.get("gantry/agent")
        return json.loads(raw) if raw else {}

    def docker_calls(self, verb: str | None = None) -> list[list[str]]:
        path = self.docker_state / "calls.jsonl"
        calls = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [c for c in calls if verb is None or c[0] == verb]

    def output(self) -> str:
        return self.serial.read_text(errors="replace") if self.serial.exists() else ""

    def agent_output(self) -> str:
        path = self.root / "agent.stdout"
        return path.read_text(errors="replace") if path.exists() else ""


def spec(run_id: str = "r1", action: str = "start", node_rank: int = 0, nnodes: int = 1, args=(),
         image: str = "us-central1-docker.pkg.dev/p/gantry/trainer@sha256:abc", launched_at: str = "t1",
         **extra) -> str:
    """A run spec as the launcher writes it (gantry.launches.launch_specs builds the same RunSpec)."""
    return RunSpec(run_id=run_id, image=image, args=tuple(args), node_rank=node_rank, nnodes=nnodes,
                   master_addr="127.0.0.1", master_port=29511, nproc_per_node=1, action=action,
                   launched_at=launched_at, **extra).to_json()
