"""A VM as this machine can be one, with only Google's endpoints served locally: the local cloud's nodes and the
node twin's.

A ``LocalNode`` boots the way a GCE VM does: the startup script that Terraform renders from
infra/modules/startup_script runs as root (its system paths moved under the node's folder, since two
nodes share this machine) against a local metadata server (local_cloud.metadata, standing where
metadata.google.internal would be). It logs the real Docker engine in to the registry with the
metadata token and installs the agent package from instance metadata key ``gantry-agent`` (and beside it the launch
contract from ``gantry-contract``) as a systemd unit;
a stand-in ``systemctl`` starts that unit's ExecStart with its EnvironmentFile, as systemd would.
From there the real agent pulls the pushed image from a real registry (``LocalRegistry``: Debian's docker-registry)
and runs the real program in the real engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from local_cloud.storage import GcsServer

METADATA_URL = "http://metadata.google.internal/computeMetadata/v1"
SYSTEM_PATHS = ("/opt/gantry", "/etc/gantry", "/var/log/gantry-agent.log")

# systemd, as far as the startup script needs it: `restart UNIT` starts the unit's ExecStart in its WorkingDirectory
# with the variables of its EnvironmentFile (over the caller's, which carry the twin's stand-in addresses).
SYSTEMCTL = r'''#!/usr/bin/env python3
import os, shlex, subprocess, sys
state = os.environ["TWIN_NODE_DIR"]
with open(os.path.join(state, "systemctl.log"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\n")
args = sys.argv[1:]
if args[:1] == ["poweroff"] and os.environ.get("LOCAL_CLOUD_POWER_OFF_URL"):
    # the agent's idle or crash-loop power-off: the local cloud stops this VM, as GCE does
    import json, urllib.request
    urllib.request.urlopen(urllib.request.Request(os.environ["LOCAL_CLOUD_POWER_OFF_URL"], method="POST", data=json.dumps(
        {"node": os.path.basename(state)}).encode(), headers={"Content-Type": "application/json"}), timeout=30)
elif args[:1] == ["restart"] and args[1].startswith("gantry-agent"):
    unit = open(os.path.join(os.environ["GANTRY_SYSTEMD_DIR"], args[1])).read().splitlines()
    settings = dict(line.split("=", 1) for line in unit if "=" in line)
    env = dict(os.environ)
    for line in open(settings["EnvironmentFile"]).read().splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            env[key] = value
    with open(os.path.join(state, "agent.stdout"), "a") as out:
        agent = subprocess.Popen(shlex.split(settings["ExecStart"]), env=env, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True, cwd=settings["WorkingDirectory"])
    open(os.path.join(state, "agent.pid"), "w").write(str(agent.pid))
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRegistry:
    """Debian's docker-registry (the reference distribution server) on a loopback port."""

    def __init__(self, root: Path):
        self.root = root
        self.host = f"127.0.0.1:{free_port()}"

    def __enter__(self):
        config = self.root / "registry.yml"
        self.root.mkdir(parents=True, exist_ok=True)
        config.write_text(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {self.root / 'data'}\n"
                          f"  delete:\n    enabled: true\nhttp:\n  addr: {self.host}\n")
        self.process = subprocess.Popen([shutil.which("docker-registry") or "docker-registry", "serve", str(config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1)
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)
        # `gantry build` tagged the image for this registry: untag it (the image stays under its other tags), so
        # the engine does not keep a 127.0.0.1:<port>/... tag per test run
        listed = subprocess.run(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"],
                                capture_output=True, text=True, check=False)
        ours = [ref for ref in listed.stdout.split() if ref.startswith(f"{self.host}/")]
        if ours:
            subprocess.run(["docker", "rmi", *ours], capture_output=True, check=False)


class LocalNode:
    def __init__(self, root: Path, metadata, script: str, bucket: GcsServer, **agent_settings: str):
        self.root, self.metadata = root, metadata
        self.bin = root / "bin"
        self.bin.mkdir(parents=True)
        (self.bin / "systemctl").write_text(SYSTEMCTL)
        (self.bin / "systemctl").chmod(0o755)
        for system_path in SYSTEM_PATHS:
            script = script.replace(f'"{system_path}', f'"{root}{system_path}')
        self.script = root / "startup.sh"
        self.script.write_text(script.replace(METADATA_URL, metadata.url))
        self.serial = root / "serial-port-2.log"
        self.env = {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "HOME": str(root),  # docker login writes HOME/.docker/config.json, as /root's on a VM
            "TWIN_NODE_DIR": str(root),
            "GANTRY_SYSTEMD_DIR": str(root / "systemd"),
            # What differs between a VM and this machine: the metadata server's address, two nodes on one
            # machine (their own state folders, no /dev/ttyS1), and the bucket's address: the agent's JSON API
            # client and the containers' gcsfs (on the host network, as the agent runs them) ask the GCS server.
            "GANTRY_METADATA_URL": metadata.url,
            "STORAGE_EMULATOR_HOST": bucket.url,
            "GANTRY_AGENT_STATE_DIR": str(root / "var-lib-gantry"),
            "GANTRY_AGENT_SERIAL": str(self.serial),
            "GANTRY_AGENT_DOCKER_RUN_ARGS": " ".join(f"-e {name}={value}" for name, value in bucket.environ.items()),
            "GANTRY_AGENT_SHM_SIZE": "1g",
            "GANTRY_AGENT_WATCH_SECONDS": "2",
            "GANTRY_AGENT_HEARTBEAT_SECONDS": "5",
            "GANTRY_AGENT_REPORTS_PER_MINUTE": "60",
            "GANTRY_AGENT_REPORT_BURST": "3",
            **agent_settings,
        }
        (root / "systemd").mkdir()

    def boot(self) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(self.script)], env=self.env, cwd=self.root, capture_output=True,
                              text=True, timeout=300, check=False)

    def report(self) -> dict:
        raw = self.metadata.guest_attributes.get("gantry/agent")
        return json.loads(raw) if raw else {}

    def output(self) -> str:
        return self.serial.read_text(errors="replace") if self.serial.exists() else ""

    def agent_output(self) -> str:
        path = self.root / "agent.stdout"
        return path.read_text(errors="replace") if path.exists() else ""

    def preempt(self, container: str) -> None:
        """What a Spot preemption leaves: the agent and the trainer gone at once, no final checkpoint; the disk
        (agent state, pulled image, the stopped container) stays for the next boot."""
        pid = int((self.root / "agent.pid").read_text())
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        subprocess.run(["docker", "kill", container], capture_output=True, timeout=60, check=False)

    def shut_down(self, grace_s: float = 60) -> None:
        """SIGTERM to the agent (it stops its container with a checkpoint), then, after ``grace_s``, make sure it
        is gone."""
        pid_file = self.root / "agent.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + grace_s
        try:
            os.kill(pid, signal.SIGTERM)
            while time.monotonic() < deadline:
                os.kill(pid, 0)
                time.sleep(0.1)
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
