"""A deployment whose `terraform output` says what infra/ would: an outputs-only module applied by the
real terraform binary, and a FakeCompute holding its nodes."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

from launch_contract import NAMESPACE, RUN_KEY


def apply_outputs_module(infra: Path, outputs: dict) -> None:
    """Write infra/main.tf with one output per key and apply it (no provider, local state)."""
    blocks = []
    for name, value in outputs.items():
        blocks.append(f'output "{name}" {{\n  value = jsondecode({json.dumps(json.dumps(value))})\n}}\n')
    infra.mkdir(parents=True, exist_ok=True)
    (infra / "main.tf").write_text("\n".join(blocks))
    # infra/variables.tf sits beside it (launcher_helpers.Deployment): its one required setting.
    project = f"-var=project_id={outputs.get('project_id', 'demo-project')}" \
        if (infra / "variables.tf").exists() else "-input=false"
    for command in (["init", "-input=false", "-no-color"],
                    ["apply", "-auto-approve", "-input=false", "-no-color", project]):
        subprocess.run(["terraform", f"-chdir={infra}", *command], check=True, capture_output=True, text=True,
                       timeout=120)


def node_address(rank: int) -> str:
    """Node ``rank``'s internal IP, as add_nodes gives the fake instances and cluster_outputs names them."""
    return f"10.128.0.{2 + rank}"


def cluster_outputs(names: list[str], zone: str = "us-central1-a", master: str = "10.128.0.2",
                    project: str = "demo-project", registry_host: str = "us-central1-docker.pkg.dev") -> dict:
    """What infra/outputs.tf gives (the names are the Python side's defaults, which equal Terraform's)."""
    return {"project_id": project, "node_names": names, "node_zones": [zone] * len(names), "zone": zone,
            "master_address": master, "node_addresses": [master, *(node_address(r) for r in range(1, len(names)))],
            "image_repository_url": f"{registry_host}/{project}/gantry",
            "bucket": f"{project}-gantry-runs", "use_gpu": False, "use_tpu": False, "run_metadata_key": RUN_KEY,
            "guest_attribute_namespace": NAMESPACE, "registry_host": registry_host}


def add_nodes(fake, names: list[str], zone: str = "us-central1-a", statuses: list[str] | None = None) -> list[dict]:
    """Instances as infra/ creates them: labelled, with the agent and startup script in metadata."""
    instances = []
    for i, name in enumerate(names):
        vm = fake.add_instance(name, zone, {"gantry-deployment": "gantry"},
                               status=(statuses or ["RUNNING"] * len(names))[i], network_ip=node_address(i))
        vm["metadata"]["items"] = [{"key": "gantry-agent", "value": "# the agent"},
                                   {"key": "startup-script", "value": "#!/bin/bash"}]
        instances.append(vm)
    return instances


def metadata_items(vm: dict) -> dict[str, str]:
    return {item["key"]: item["value"] for item in vm["metadata"]["items"]}


def kit_run_folder(run_url: str, staging: Path):
    """The kit's trainer's run folder on node 0 (its gantry.yaml's sync folder) and the agent's copy of it in the
    bucket (gantry_agent.sync.FolderSync), through which every program's outputs reach the bucket."""
    import os

    from gantry.launches import program_file
    from gantry_agent.sync import FolderSync
    from launch_contract import storage_endpoint, sync_url

    (folder,) = program_file.load(program_file.KIT_ROOT).sync
    local = staging / folder
    local.mkdir(parents=True, exist_ok=True)
    return local, FolderSync(str(local), sync_url(run_url, 0, folder), lambda: "", storage_endpoint(os.environ))


@contextlib.contextmanager
def trainer_stats(run_url: str, staging: Path):
    """The trainer's stats writer (selfplay.stats.RunLog) in its run folder, copied to the bucket by the node
    agent's own code when the block ends, as the agent copies it while the trainer runs. Calls with the same
    ``staging`` append to one stats.jsonl."""
    from selfplay.stats import RunLog

    local, copy = kit_run_folder(run_url, staging)
    log = RunLog(local, stream=io.StringIO())
    yield log
    log.close()
    copy.push()
