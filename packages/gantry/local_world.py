"""Which cloud a verb talks to: Google Cloud, or the local cloud `make local-cloud` started on this machine.

While the local cloud is up its process keeps ``.local-cloud/world.json`` (beside ``infra/``, in the folder make
runs in): its deployment folder (a Terraform root module of its own, never ``infra/``) and the endpoints that stand
where Google's would (Compute, the REST APIs, Cloud Storage). Every verb then talks to it and says so in its first
line, and ``infra/`` (a real deployment's state included) is not read or touched until `make local-cloud-down`:
which world a verb talks to is never a guess. The file is the contract between gantry (which reads it) and
packages/local_cloud (which writes it); both take its name and keys from here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from gantry.errors import GantryError

FOLDER = Path(".local-cloud")
FOLDER_ENV = "GANTRY_LOCAL_CLOUD_DIR"  # another folder for it (the tests': never the checkout's, which others read)
WORLD_FILE = "world.json"
# set in a verb's environment while it talks to the local cloud: what bills says so (gantry.cli.apply)
LOCAL_ENV = "GANTRY_LOCAL_CLOUD"


@dataclass(frozen=True)
class LocalWorld:
    pid: int  # the local cloud's process: the world is up while it runs
    nodes: int
    infra_dir: str  # its Terraform root module (`make apply` there creates its nodes)
    environ: dict[str, str]  # where Google's endpoints would be: GANTRY_COMPUTE_ENDPOINT, STORAGE_EMULATOR_HOST, ...
    control_url: str  # the local cloud's own requests: nodes, preempt

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".{WORLD_FILE}.part"
        partial.write_text(json.dumps(dataclasses.asdict(self), indent=1))
        partial.replace(folder / WORLD_FILE)

    @property
    def var_file(self) -> Path:
        return Path(self.infra_dir) / "terraform.tfvars"

    def banner(self) -> str:
        """The first line of every verb while the local cloud is up."""
        real = " (your Google Cloud deployment in infra/ is not touched meanwhile)" if _has_state(Path("infra")) else ""
        return (f"gantry: local cloud: {self.nodes} node(s) on this machine, bills nothing{real}. "
                "`make local-cloud-down` goes back to Google Cloud.")


def folder_of(environ) -> Path:
    return Path(environ.get(FOLDER_ENV) or FOLDER)


def read(folder: Path) -> LocalWorld | None:
    """The world file as it is, its process alive or not; None when there is none."""
    try:
        return LocalWorld(**json.loads((folder / WORLD_FILE).read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        raise GantryError(f"{folder / WORLD_FILE} is unreadable ({exc})",
                          "Run `make local-cloud-down` to clear it, then `make local-cloud` again.") from exc


def current(folder: Path = FOLDER) -> LocalWorld | None:
    """The local cloud that is up here, None when there is none; a world file whose process is gone is refused (a
    verb would otherwise talk to Google while the user thinks it is local, or to endpoints nobody serves)."""
    world = read(folder)
    if world is None:
        return None
    if not alive(world.pid):
        raise GantryError(f"the local cloud's process (pid {world.pid}) is gone, but {folder / WORLD_FILE} says it is "
                          "up", "Run `make local-cloud-down` to clear what it left, then `make local-cloud` for a "
                                "fresh one (or stay down to talk to Google Cloud).")
    return world


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _has_state(infra: Path) -> bool:
    """A Terraform state with resources in it: a deployment applied on Google."""
    try:
        return bool(json.loads((infra / "terraform.tfstate").read_text()).get("resources"))
    except (OSError, ValueError):
        return False
