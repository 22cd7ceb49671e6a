"""The local cloud: Google's endpoints and N Spot VMs on this machine, for the README's walkthrough before it bills.

    python -m local_cloud up --nodes 2        (make local-cloud NODES=2)

One process serves, on loopback ports it picks (nothing fixed, so nothing collides):

- the Compute API (local_cloud.compute) and the REST APIs gantry calls without a client (local_cloud.googleapis),
  both with Google's JSON shapes, so `make preflight`, `status`, `stop` and `destroy` ask them as they ask Google;
- Cloud Storage (local_cloud.storage: fake-gcs-server), the run's bucket for gantry, the agents and the containers;
- an image registry (Debian's docker-registry), where `make build-train` pushes and the nodes pull;
- one metadata server per node, and the nodes themselves (local_cloud.node): the startup script Terraform renders
  from infra/modules/startup_script, run as root, which installs the real agent, which runs the user's image in the
  real Docker engine.

Its deployment is a Terraform root module of its own (``.local-cloud/infra``: infra/variables.tf, a tfvars file, the
real startup-script module and a ``terraform_data`` whose provisioners ask this process to create and delete the
nodes), so `make apply` and `make destroy` run the real terraform binary with no provider to download. While it is
up, gantry's verbs talk to it (gantry.local_world). Spot preemption is a request: `make preempt NODE=1` gives the
node's agent SIGTERM and the 30 s Google gives, then stops the VM; `make status` starts it again, as on Google.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from gantry.gcp import APIS_ENDPOINT_ENV, ENDPOINT_ENV
from gantry.local_world import WORLD_FILE, LocalWorld
from gantry_agent import shipped_files
from launch_contract import NAMESPACE, RUN_KEY, RunSpec

from local_cloud.compute import REPO, FakeCompute
from local_cloud.googleapis import FakeGoogleApis
from local_cloud.loopback import LoopbackServer, StandInHandler
from local_cloud.metadata import FakeMetadata
from local_cloud.node import LocalNode, LocalRegistry
from local_cloud.storage import gcs_server

PROJECT = "gantry-local"
ZONE = "us-central1-a"
FALLBACK_ZONES = ("us-central1-b", "us-central1-c")  # C4 is offered there too (FakeCompute.us_central1)
MACHINE_TYPE = "c4-highcpu-8"
SHORT_CPU_QUOTA = 8  # `make fault FAULT=quota`: one node's worth, fewer than two nodes need
DEPLOYMENT = "gantry"
SPOT_NOTICE_S = 30  # Google's: a preempted VM gets an ACPI shutdown and 30 s before it is stopped
CONTAINER_LABEL = "gantry-local-cloud"  # on every container the local nodes' agents run: `down` removes them all


def node_names(count: int) -> list[str]:
    return [f"{DEPLOYMENT}-node-{rank}" for rank in range(count)]


@dataclass
class Vm:
    """One node: its Compute record, its metadata server and its LocalNode."""

    record: dict
    metadata: FakeMetadata
    node: LocalNode


class LocalCloud:
    def __init__(self, folder: Path, nodes: int):
        self.folder, self.count = folder.resolve(), nodes
        self.vms: list[Vm] = []
        self.stocked_out: set[str] = set()  # zones `make fault FAULT=stockout` emptied of capacity
        self.lock = threading.Lock()
        self.stack = ExitStack()

    # ---- up and down ----
    def __enter__(self) -> LocalCloud:
        try:
            self.compute = self.stack.enter_context(FakeCompute.us_central1(project=PROJECT))
            self.compute.on_start = self.started  # `make status` starts a preempted Spot VM: it boots again
            self.compute.on_stop = self.stopped  # `make stop ARGS=--power-off`: its agent and program go down
            self.apis = self.stack.enter_context(FakeGoogleApis(project=PROJECT))
            self.registry = self.stack.enter_context(LocalRegistry(self.folder / "registry"))
            self.bucket_name = f"{PROJECT}-gantry-runs"
            self.bucket = self.stack.enter_context(gcs_server())  # the bucket itself: `make apply`
            self.control = self.stack.enter_context(Control(cloud=self))
            self.stack.callback(self.delete_nodes)
            self.write_deployment()
            self.world().write(self.folder)  # last: from here on gantry's verbs talk to this world
            self.stack.callback((self.folder / WORLD_FILE).unlink, missing_ok=True)  # first of all on the way out
        except BaseException:
            self.stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()

    @property
    def environ(self) -> dict[str, str]:
        """What gantry's clients need to reach this world instead of Google's."""
        return {ENDPOINT_ENV: self.compute.endpoint, APIS_ENDPOINT_ENV: self.apis.endpoint, **self.bucket.environ}

    def world(self) -> LocalWorld:
        return LocalWorld(pid=os.getpid(), nodes=self.count, infra_dir=str(self.folder / "infra"),
                          environ=self.environ, control_url=self.control.base_url)

    def outputs(self) -> dict:
        """infra/outputs.tf's outputs that do not depend on the zone, as this world has them (the master on
        loopback: the nodes share the host's network, as the containers on one VM do)."""
        names = node_names(self.count)
        return {"project_id": PROJECT, "node_names": names,
                "master_address": "127.0.0.1", "node_addresses": ["127.0.0.1"] * self.count,
                "image_repository_url": f"{self.registry.host}/{PROJECT}/{DEPLOYMENT}",
                "bucket": self.bucket_name, "use_gpu": False, "use_tpu": False, "run_metadata_key": RUN_KEY,
                "guest_attribute_namespace": NAMESPACE}

    def write_deployment(self) -> None:
        """The local deployment's root module: the variables and rules of infra/, this world's settings, and the
        nodes as a terraform_data whose provisioners ask this process (no provider: init needs no network)."""
        infra = self.folder / "infra"
        infra.mkdir(parents=True, exist_ok=True)
        for table in [REPO / "infra" / "variables.tf", *(REPO / "infra").glob("*.json")]:
            (infra / table.name).write_text(table.read_text())
        (infra / "terraform.tfvars").write_text(
            f'project_id = "{PROJECT}"\nzone = "{ZONE}"\nfallback_zones = {json.dumps(list(FALLBACK_ZONES))}\n'
            f'deployment_name = "{DEPLOYMENT}"\nnode_count = {self.count}\ncpu_machine_type = "{MACHINE_TYPE}"\n'
            'spot = true\nmax_run_hours = 6\n')
        cuda = json.loads((REPO / "docker" / "torch.json").read_text())["cuda"]
        command = f"{sys.executable} -m local_cloud"
        outputs = "".join(f'output "{name}" {{\n  value = jsondecode({json.dumps(json.dumps(value))})\n}}\n\n'
                          for name, value in self.outputs().items())
        (infra / "main.tf").write_text(f'''# The local cloud's deployment (packages/local_cloud/cloud.py writes it at `make local-cloud`).
module "startup_script" {{
  source                = "{REPO / "infra" / "modules" / "startup_script"}"
  deployment_name       = var.deployment_name
  registry_host         = "{self.registry.host}"
  required_cuda_version = "{cuda}"
  use_gpu               = false
}}

resource "terraform_data" "bucket" {{
  input = {{ command = "{command}", folder = "{self.folder}" }}

  provisioner "local-exec" {{
    command = "${{self.input.command}} --dir ${{self.input.folder}} create-bucket"
  }}
  provisioner "local-exec" {{
    when    = destroy
    command = "${{self.input.command}} --dir ${{self.input.folder}} delete-bucket"
  }}
}}

resource "terraform_data" "nodes" {{
  input            = {{ command = "{command}", folder = "{self.folder}" }}
  triggers_replace = [var.node_count, var.zone, module.startup_script.script]

  provisioner "local-exec" {{
    command     = "${{self.input.command}} --dir ${{self.input.folder}} create-nodes --count ${{var.node_count}} --zone ${{var.zone}}"
    environment = {{ STARTUP_SCRIPT = module.startup_script.script }}
  }}
  provisioner "local-exec" {{
    when    = destroy
    command = "${{self.input.command}} --dir ${{self.input.folder}} delete-nodes"
  }}
}}

output "zone" {{
  value = var.zone
}}

output "node_zones" {{
  value = [for _ in range(var.node_count) : var.zone]
}}

{outputs}''')

    # ---- the nodes ----
    def create_nodes(self, count: int, script: str, zone: str) -> list[str]:
        """`terraform apply`: the Spot VMs infra/ would create, each booting (startup script -> agent) at once; a
        stock-out or a quota `make fault` asked for fails as Google fails it, in the google provider's words."""
        if zone in self.stocked_out:
            raise LookupError(f"Error waiting for instance to create: The zone 'projects/{PROJECT}/zones/{zone}' does "
                              "not have enough resources available to fulfill the request.  Try a different zone, or "
                              "try again later.")
        limit = self.compute.region_quotas["us-central1"]["CPUS"][0]
        if count * self.compute.machine_types[zone][MACHINE_TYPE][0] > limit:
            raise LookupError(f"Error creating instance: googleapi: Error 403: Quota 'CPUS' exceeded.  Limit: {limit} "
                              "in region us-central1., quotaExceeded")
        self.delete_nodes()
        with self.lock:
            for name in node_names(count):
                record = self.compute.add_instance(name, zone, {"gantry-deployment": DEPLOYMENT},
                                                   machine_type=MACHINE_TYPE, network_ip="127.0.0.1")
                record["scheduling"] = {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"}
                record["metadata"]["items"] = [
                    {"key": "gantry-agent", "value": json.dumps(shipped_files())},
                    {"key": "gantry-contract", "value": (REPO / "packages" / "launch_contract.py").read_text()},
                    {"key": "startup-script", "value": script}]
                metadata = FakeMetadata(instance=record, project_id=PROJECT, zone=zone).__enter__()
                root = self.folder / "nodes" / name
                subprocess.run(["rm", "-rf", str(root)], check=False)
                node = LocalNode(root, metadata, script, self.bucket,
                                 LOCAL_CLOUD_POWER_OFF_URL=f"{self.control.base_url}/power-off",
                                 GANTRY_AGENT_DOCKER_RUN_ARGS=" ".join(
                                     [f"--label {CONTAINER_LABEL}={self.folder}",
                                      *(f"-e {k}={v}" for k, v in self.bucket.environ.items())]))
                record["serialPortFile"] = str(node.serial)
                self.vms.append(Vm(record, metadata, node))
            for vm in self.vms:
                self.boot(vm)
        return node_names(count)

    def boot(self, vm: Vm) -> None:
        def run():
            booted = vm.node.boot()
            with open(vm.node.root / "boot.log", "a") as log:
                log.write(booted.stdout + booted.stderr + f"\n[boot exited {booted.returncode}]\n")

        threading.Thread(target=run, daemon=True, name=f"boot {vm.record['name']}").start()

    def boot_output(self, rank: int) -> str:
        """What node ``rank``'s boots printed (the startup script's output and exit status)."""
        log = self.vms[rank].node.root / "boot.log" if rank < len(self.vms) else None
        return log.read_text(errors="replace") if log and log.exists() else ""

    def started(self, record: dict) -> None:
        """instances.start of a stopped VM: it boots again from its disk (the agent's state and image stay)."""
        for vm in self.vms:
            if vm.record is record:
                self.boot(vm)

    def stopped(self, record: dict) -> None:
        """instances.stop of a running VM, or its agent's `systemctl poweroff`: the guest shuts down (the agent's
        SIGTERM stops its program with a checkpoint), in the background as on GCE, and what still runs is gone."""
        vm = next(vm for vm in self.vms if vm.record is record)
        threading.Thread(target=self.shut_down, args=(vm,), daemon=True, name=f"stop {record['name']}").start()

    def shut_down(self, vm: Vm) -> None:
        vm.node.shut_down()
        spec = run_spec(vm)
        if spec is not None:  # stopped by its agent, or not: the VM is off, and so is the program
            subprocess.run(["docker", "stop", "-t", "0", spec.container], capture_output=True, timeout=60, check=False)

    def power_off(self, name: str) -> str:
        """A node's own power-off (the agent's idle_shutdown_minutes or crash loop): the VM stops."""
        vm = next((vm for vm in self.vms if vm.record["name"] == name), None)
        if vm is None:
            raise LookupError(f"no node {name} to power off")
        if vm.record["status"] == "RUNNING":
            vm.record["status"] = "TERMINATED"
            self.stopped(vm.record)
        return f"{name} powered off"

    def delete_nodes(self) -> None:
        """`terraform destroy`: each node shut down (its agent's SIGTERM: a checkpoint), its containers gone."""
        with self.lock:
            for vm in self.vms:
                vm.node.shut_down()
                vm.metadata.__exit__(None, None, None)
                self.compute.instances.remove(vm.record)
            self.vms = []
        remove_containers(str(self.folder))

    def create_bucket(self) -> str:
        """`terraform apply`: the run-data bucket, labelled as infra/ labels it (the inventory of `make destroy`
        finds it through the Storage API's buckets.list)."""
        if not any(b["name"] == self.bucket_name for b in self.apis.buckets):
            if not self.bucket.bucket_exists(self.bucket_name):
                self.bucket.create_bucket(self.bucket_name)
            self.apis.buckets.append({"name": self.bucket_name, "location": "US-CENTRAL1",
                                      "labels": {"gantry-deployment": DEPLOYMENT}})
        return f"gs://{self.bucket_name}"

    def delete_bucket(self) -> str:
        """`terraform destroy`: as the google provider does with force_destroy = false (infra/storage.tf), a bucket
        that holds objects is refused with the provider's words (resource_storage_bucket.go), and kept."""
        held = len(self.bucket.names(f"gs://{self.bucket_name}"))
        if held:
            raise LookupError(f"Error trying to delete bucket {self.bucket_name} containing objects without "
                              "`force_destroy` set to true")
        self.bucket.delete_bucket(self.bucket_name)
        self.apis.buckets[:] = [b for b in self.apis.buckets if b["name"] != self.bucket_name]
        return f"gs://{self.bucket_name} deleted"

    def fault(self, fault: str) -> str:
        """What `make fault FAULT=...` asks of the world from now on, said in one line."""
        quotas = self.compute.region_quotas["us-central1"]
        self.stocked_out.clear()
        for metric in ("CPUS", "C4_CPUS"):
            quotas[metric] = (72, quotas[metric][1])
        if fault == "stockout":
            self.stocked_out.add(ZONE)
            return (f"zone {ZONE} has no {MACHINE_TYPE} capacity now: the next `make apply` that creates nodes meets "
                    f"Google's stock-out and moves on to fallback_zones ({', '.join(FALLBACK_ZONES)})")
        if fault == "quota":
            for metric in ("CPUS", "C4_CPUS"):
                quotas[metric] = (SHORT_CPU_QUOTA, quotas[metric][1])
            return (f"region us-central1's CPUS and C4_CPUS quotas are {SHORT_CPU_QUOTA} vCPUs now: `make preflight` "
                    "and `make apply` meet what Google answers a deployment that needs more")
        return "no fault: every zone has capacity and the quotas are as they were"

    def preempt(self, rank: int) -> str:
        """What a Spot preemption does to node ``rank``: SIGTERM to the agent (it stops the program, which
        checkpoints, and copies its --sync folders), 30 s, then the VM is stopped: whatever still runs is gone."""
        if not 0 <= rank < len(self.vms):
            raise LookupError(f"there is no node {rank}: the local cloud has nodes 0 to {len(self.vms) - 1}"
                              if self.vms else "there are no nodes yet: run `make apply` first")
        vm = self.vms[rank]
        spec = run_spec(vm)
        if spec is None or vm.record["status"] != "RUNNING":
            raise LookupError(f"node {rank} runs nothing to preempt ({vm.record['status'].lower()}, "
                              f"{'run ' + spec.run_id if spec else 'no run'}): start one with `make run-gcp`")
        begun = time.monotonic()
        vm.node.shut_down(grace_s=SPOT_NOTICE_S)
        remove_containers(str(self.folder), name=spec.container)
        vm.record["status"] = "TERMINATED"
        return (f"preempted node {rank} ({vm.record['name']}, run {spec.run_id}): SIGTERM, its agent stopped the "
                f"program in {time.monotonic() - begun:.0f} s of the {SPOT_NOTICE_S} s notice; the VM is stopped. "
                "`make status` starts it again, and the run resumes.")


def run_spec(vm: Vm) -> RunSpec | None:
    """The run spec in the VM's metadata (RUN_KEY), as its agent reads it."""
    raw = {i["key"]: i["value"] for i in vm.record["metadata"]["items"]}.get(RUN_KEY)
    return RunSpec.from_json(raw) if raw else None


def remove_containers(folder: str, name: str | None = None) -> int:
    """The local nodes' containers (their label), or one of them; how many there were."""
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={CONTAINER_LABEL}={folder}",
                             *(["--filter", f"name=^{name}$"] if name else [])],
                            capture_output=True, text=True, timeout=60, check=False)
    if listed.stdout.split():
        subprocess.run(["docker", "rm", "-f", *listed.stdout.split()], capture_output=True, timeout=300, check=False)
    return len(listed.stdout.split())


class _ControlHandler(StandInHandler):
    """The local cloud's own requests (terraform's provisioners, `make preempt`): JSON in, JSON out."""

    fake: Control

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        cloud = self.fake.cloud
        try:
            if self.path == "/nodes":
                answer = {"nodes": cloud.create_nodes(int(body["count"]), body["script"], body["zone"])}
            elif self.path == "/nodes/delete":
                cloud.delete_nodes()
                answer = {"nodes": []}
            elif self.path == "/bucket":
                answer = {"said": cloud.create_bucket()}
            elif self.path == "/bucket/delete":
                answer = {"said": cloud.delete_bucket()}
            elif self.path == "/fault":
                answer = {"said": cloud.fault(body["fault"])}
            elif self.path == "/preempt":
                answer = {"said": cloud.preempt(int(body["node"]))}
            elif self.path == "/power-off":
                answer = {"said": cloud.power_off(str(body["node"]))}
            else:
                self.reply_json(404, {"error": f"no such request {self.path}"})
                return
        except LookupError as exc:
            self.reply_json(409, {"error": str(exc.args[0])})
            return
        self.reply_json(200, answer)


@dataclass
class Control(LoopbackServer):
    cloud: LocalCloud


Control.handler_class = _ControlHandler


def serve(folder: Path, nodes: int) -> None:
    """Run the local cloud until SIGTERM (`make local-cloud-down`): then its nodes, servers and world file go."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with LocalCloud(folder, nodes):
        stop.wait()
