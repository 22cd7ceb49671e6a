"""gantry push (make push-train): push the built trainer image to the deployment's repository."""

from __future__ import annotations

from gantry.flows import publish
from gantry.status import ExitStatus

NAME = "push"
HELP = "push the built trainer image to the deployment's Artifact Registry repository (make build-train does it too)"
DESCRIPTION = """\
Push gantry-trainer:cpu (:cuda when use_gpu = true, :tpu when use_tpu = true) to the repository that
`make apply` created, as REPO/gantry-trainer:cpu|cuda|tpu, with your Google credentials (no docker login
needed).
`make run-gcp` pins the nodes to the digest the registry then holds. `make build-train` builds and
pushes in one step; this verb is for an image built earlier or elsewhere.

examples:
  gantry push
  make push-train
"""


def add_arguments(parser) -> None:
    publish.add_flavour_arguments(parser)


def run(args, env) -> ExitStatus:
    return publish.publish(args, env, publish.chosen_flavour(args))
