"""gantry devcontainer --project DIR: a dev container for your own project, in the image its cloud runs use."""

from __future__ import annotations

import json
import os
from pathlib import Path

from launch_contract import PROJECT_ROOT

from gantry import images, projects
from gantry.errors import GantryError
from gantry.flows import publish
from gantry.projects import build as project_build
from gantry.projects import context as project_context
from gantry.projects import dockerfile as project_dockerfile
from gantry.status import ExitStatus

NAME = "devcontainer"
HELP = "write DIR/.devcontainer/devcontainer.json: your project in the image `gantry build --project` makes"
DESCRIPTION = f"""\
Write DIR/.devcontainer/devcontainer.json for VS Code's Dev Containers or the devcontainer CLI: the
project's image of the deployment's flavour (the local tag `gantry build --project DIR` makes, built here
first when the engine lacks it; it has git and make, and the Debian packages DIR/apt.txt names), with DIR mounted at
{PROJECT_ROOT}, the image's working directory, where `gantry run --project DIR -- COMMAND` runs your command in the
cloud; you work there as your own user (writable as on the host). Nothing else in DIR is written; an
existing devcontainer.json is kept unless --force.

Then `devcontainer up --workspace-folder DIR`, or VS Code's "Dev Containers: Reopen in Container".

examples:
  gantry devcontainer --project ../my-trainer
  gantry devcontainer --project ../my-trainer --gpu --force      # the CUDA image, replacing the file
"""


def add_arguments(parser) -> None:
    publish.add_flavour_arguments(parser)
    parser.add_argument("--project", type=Path, required=True, metavar="DIR", help="your project's folder")
    parser.add_argument("--force", action="store_true", help="replace an existing .devcontainer/devcontainer.json")
    parser.add_argument("--no-build", action="store_true", help="write the file only; build the image later")
    parser.add_argument("--base-image", help="BASE_IMAGE of a build here (e.g. gantry-base:bookworm)")


def config(project: Path, image: str, kind: str) -> dict:
    """The devcontainer.json: the image, the project mounted at its working directory."""
    settings = {
        "name": projects.name(project),
        "image": image,
        "workspaceFolder": PROJECT_ROOT,
        "workspaceMount": f"source=${{localWorkspaceFolder}},target={PROJECT_ROOT},type=bind",
        # as the kit's own dev container: the host network and a /dev/shm big enough for torch's workers
        "runArgs": ["--network=host", "--shm-size=1g"],
        "init": True,
        "hostRequirements": {"gpu": "optional"},
    }
    if kind != "Dockerfile":
        # The generated image's uid 1000, to which the CLI gives the host user's uid, so the mounted folder is
        # writable as on the host; except for root, whose uid it leaves alone: a root host (a CI machine, a cloud VM)
        # works in the container as root, else its folder would be read-only inside.
        settings["remoteUser"] = "root" if os.geteuid() == 0 else "trainer"
    return settings


def run(args, env) -> ExitStatus:
    project = args.project
    kind = project_dockerfile.kind(project)
    target = project / ".devcontainer" / "devcontainer.json"
    if target.exists() and not args.force:
        raise GantryError(f"{target} exists", "Pass --force to replace it")
    flavour = publish.chosen_flavour(args)
    # Written before the tag is taken: in a git work tree the new file makes it uncommitted, so the version becomes
    # the content hash (which leaves .devcontainer out), the one `gantry build --project` will tag with next.
    target.parent.mkdir(exist_ok=True)
    previous = target.read_text() if target.exists() else None
    target.write_text("{}\n")
    tag = projects.local_ref(project, flavour)
    if args.no_build:
        env.say(f"gantry: {tag} is not built here: run `gantry build --project {project} --no-push` before "
                f"opening the dev container")
    else:
        try:
            if not images.image_exists(tag):
                env.say(f"gantry: no {tag} yet: building it (as `gantry build --project {project} --no-push`)")
                project_build.build(project, flavour, env.say, max_context_mb=project_context.DEFAULT_MAX_CONTEXT_MB,
                                    build_args={"BASE_IMAGE": args.base_image} if args.base_image else {},
                                    wheel_dir=images.default_wheel_dir(), ca_certs=images.default_ca_certs())
        except BaseException:  # no image: the folder as it was
            target.write_text(previous) if previous is not None else target.unlink()
            raise
    target.write_text("// Written by `gantry devcontainer`: the image `gantry build --project` makes, the project "
                      f"at {PROJECT_ROOT}.\n" + json.dumps(config(project, tag, kind), indent=4) + "\n")
    env.say(f"Wrote {target} ({tag}). Open it: `devcontainer up --workspace-folder {project}` or VS Code's "
            "\"Dev Containers: Reopen in Container\".")
    return ExitStatus.OK
