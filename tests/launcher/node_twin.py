"""The node twin's parts: a VM as this machine can be one, with only Google's endpoints served locally.

A ``TwinNode`` boots the way a GCE VM does: the startup script that Terraform renders from
infra/modules/startup_script runs as root (its system paths moved under the node's folder, since two
nodes share this machine) against a local metadata server (FakeMetadata, standing where
metadata.google.internal would be). It logs the real Docker engine in to the registry with the
metadata token and installs the agent package from instance metadata key ``gantry-agent`` (and beside it the launch
contract from ``gantry-contract``) as a systemd unit;
a stand-in ``systemctl`` starts that unit's ExecStart with its EnvironmentFile, as systemd would.
From there the real agent pulls the pushed image from a real registry and runs the real trainer in
the real engine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from unittest import mock

import gcsfs
from gcs_server import GcsServer, gcs_server

sys.path.append(str(Path(__file__).resolve().parents[1] / "infra"))  # the renderer tests/infra uses
from checkout import REPO
from gantry_agent import shipped_files
from infra_tools import render_startup_script

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
if args[:1] == ["restart"] and args[1].startswith("gantry-agent"):
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


def startup_script(work_dir: Path, registry_host: str) -> str:
    """The CPU node's startup script exactly as Terraform renders it for the deployment."""
    return render_startup_script(work_dir, registry_host=registry_host, use_gpu=False)


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


class TwinNode:
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
        import json

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

    def shut_down(self) -> None:
        """SIGTERM to the agent (it stops its container with a checkpoint), then make sure it is gone."""
        pid_file = self.root / "agent.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text())
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(600):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


class TwinDeployment:
    """`make apply` as the twin has it: terraform output of the deployment (nodes, registry, master at 127.0.0.1),
    Spot VMs in the fake Compute API with the agent and the startup script in their metadata, a local registry,
    and the bucket in a GCS server (fake-gcs-server, tests/gcs_server.py) that gantry here, the agents and the
    containers reach over loopback; ``names`` and ``read`` look into it."""

    def __init__(self, stack, fake, infra: Path, tmp_path: Path, names: list[str]):
        from runs_helpers import add_nodes, apply_outputs_module, cluster_outputs

        self.stack, self.tmp_path = stack, tmp_path
        self.registry = stack.enter_context(LocalRegistry(tmp_path / "registry"))
        self.outputs = cluster_outputs(names, master="127.0.0.1", registry_host=self.registry.host)
        self.bucket = stack.enter_context(gcs_server(self.outputs["bucket"]))  # what `make apply` made
        self.bucket_url = f"gs://{self.outputs['bucket']}"
        stack.enter_context(mock.patch.dict(os.environ, self.bucket.environ))  # gantry's gcsfs in this process
        gcsfs.GCSFileSystem.clear_instance_cache()  # one per arguments, listings cached: not another test's
        self.environ: dict[str, str] = {}  # the run's folder is gs://BUCKET/runs/RUN_ID, as on Google
        apply_outputs_module(infra, self.outputs)
        self.script = startup_script(tmp_path, self.registry.host)
        self.vms = add_nodes(fake, names)
        for vm in self.vms:  # Spot VMs that stop when preempted, as infra/ creates them with spot = true
            vm["scheduling"] = {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}
            # what infra/locals.tf ships: the agent, the launch contract it imports, the startup script
            vm["metadata"]["items"] = [{"key": "gantry-agent", "value": json.dumps(shipped_files())},
                                       {"key": "gantry-contract",
                                        "value": (REPO / "packages/launch_contract.py").read_text()},
                                       {"key": "startup-script", "value": self.script}]

    def names(self, folder: str) -> list[str]:
        """The objects under the bucket's ``folder`` (e.g. runs/twin), their names relative to it."""
        return self.bucket.names(f"{self.bucket_url}/{folder}")

    def read(self, path: str) -> bytes:
        """The object at the bucket's ``path`` (e.g. runs/twin/stats.jsonl); FileNotFoundError where there is none."""
        return self.bucket.read(f"{self.bucket_url}/{path}")

    def boot(self, run_id: str) -> list[TwinNode]:
        """Each VM boots: startup script as root -> docker login with the metadata token -> the agent as a unit.
        Its agent and the run's containers go when the test ends."""
        from fake_metadata import FakeMetadata

        nodes = []
        for rank, vm in enumerate(self.vms):
            metadata = self.stack.enter_context(FakeMetadata(instance=vm))
            node = TwinNode(self.tmp_path / f"vm{rank}", metadata, self.script, self.bucket)
            self.stack.callback(node.shut_down)
            self.stack.callback(subprocess.run, ["docker", "rm", "-f", f"gantry-run-{run_id}-{rank}"],
                                capture_output=True, timeout=300, check=False)
            vm["serialPortFile"] = str(node.serial)
            booted = node.boot()
            assert booted.returncode == 0, booted.stdout + booted.stderr
            assert metadata.guest_attributes["gantry/boot"] == "ready"
            nodes.append(node)
        return nodes


# ---- the README's cloud walkthrough, as the twin runs it ----------------------------------------------------------

WALKTHROUGH_MARK = "<!-- walkthrough: the node twin runs this block -->"
OWN_PROJECT_MARK = "<!-- own project: the node twin runs this block -->"
# What only Google answers: the twin's deployment is `make apply`'s terraform outputs, not a tfvars file that `make
# cost` prices; preflight asks Google's quotas and destroy Google's inventory. tests/launcher/test_launcher_cost.py,
# test_launcher_preflight*.py and test_launcher_destroy.py prove those verbs against the same stand-ins.
NOT_IN_THE_TWIN = {"cost": "prices a tfvars file", "preflight": "asks Google's quotas",
                   "destroy": "asks Google's inventory"}


def make_target_verbs() -> dict[str, str]:
    """Each make target whose recipe runs `-m gantry VERB` -> VERB, read from the Makefile and mk/*.mk."""
    import re

    verbs: dict[str, str] = {}
    for makefile in [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))]:
        target = None
        for line in makefile.read_text().splitlines():
            if (rule := re.match(r"^([a-z][a-z0-9-]*):", line)) is not None:
                target = rule.group(1)
            elif line.startswith("\t") and target and (run := re.search(r"-m gantry (\w+)", line)):
                verbs.setdefault(target, run.group(1))
    return verbs


def readme_walkthrough(mark: str = WALKTHROUGH_MARK) -> list[tuple[str, list[str]]]:
    """A README block the twin runs (the cloud walkthrough, or your own project's) as (gantry verb, its ARGS) in the
    README's order: each `make TARGET [PROJECT=DIR] [ARGS=...]` line mapped through the target's recipe (PROJECT=DIR
    is the recipes' --project DIR). Lines that are not make commands (gcloud, cp) are Google's or the user's own and
    are skipped; a make target that runs no gantry verb fails here, so the README cannot name one the twin does not
    know."""
    import shlex

    text = (REPO / "README.md").read_text()
    assert mark in text, f"README.md lost its marker {mark!r}"
    block = text.split(mark, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    verbs = make_target_verbs()
    steps = []
    for line in block.splitlines():
        if not line.startswith("make "):  # gcloud (Google's), cp (the user's), comments, continued lines
            continue
        words = shlex.split(line, comments=True)
        target, args = words[1], []
        for word in words[2:]:
            if word.startswith("PROJECT="):
                args = ["--project", word[len("PROJECT="):], *args]
            elif word.startswith("ARGS="):
                args = [*args, *shlex.split(word[len("ARGS="):])]
            elif word.startswith("RUN="):  # make fetch RUN=RUN_ID: the recipe's positional run id
                args = [*args, word[len("RUN="):]]
        assert target in verbs, f"README's block names `make {target}`, which runs no gantry verb"
        steps.append((verbs[target], args))
    return steps
