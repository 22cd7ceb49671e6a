"""gantry preflight: will `make apply` work? Read-only checks against the Compute API."""

from __future__ import annotations

from gantry import config
from gantry.errors import CheckFailed
from gantry.flows.readiness import check_and_show
from gantry.status import ExitStatus

NAME = "preflight"
HELP = "check credentials, API, machine/GPU availability and quotas; print $/h (creates nothing)"
DESCRIPTION = """\
Check, without creating anything, that `make apply` can succeed for the deployment in
infra/terraform.tfvars: Google credentials on this machine, the project and its Compute
Engine API, the machine type (and GPU) in the zone, and every quota the whole deployment
needs (node_count x one node). Each problem comes with the exact shortfall and the
command or console page that fixes it. Ends with the hourly cost.

Exit status: 0 ready, 3 a blocker was found, 1 another error.

examples:
  gantry preflight
  make preflight
  gcloud auth application-default login && make preflight   # first time on a machine
"""


def add_arguments(parser) -> None:
    pass


def run(args, env) -> ExitStatus:
    deployment = config.load(args.var_file, args.infra_dir)
    report = check_and_show(deployment, env)
    if report.failed:
        names = ", ".join(c.name for c in report.failed)
        raise CheckFailed(f"preflight found {len(report.failed)} blocker(s): {names}",
                          "Apply the fixes listed above, then `make preflight` again.")
    env.say("Ready: `make apply` creates this deployment.")
    return ExitStatus.OK
