"""gantry preflight: will `make apply` work? Read-only checks against the Compute API."""

from __future__ import annotations

from gantry import checks, config, cost, preflight, project_setup
from gantry.errors import CheckFailed
from gantry.gcp import Compute, GoogleApis
from gantry.local_world import LOCAL_ENV
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
    report = check(deployment, env)
    if report.failed:
        names = ", ".join(c.name for c in report.failed)
        raise CheckFailed(f"preflight found {len(report.failed)} blocker(s): {names}",
                          "Apply the fixes listed above, then `make preflight` again.")
    env.say("Ready: `make apply` creates this deployment.")
    return ExitStatus.OK


def check(deployment, env) -> preflight.Report:
    """Run and print preflight and the cost estimate (shared with `gantry apply`)."""
    compute = Compute.connect(env.environ)  # raises with the login command when there are none
    report = preflight.run(deployment, compute, GoogleApis.connect(env.environ))
    first = preflight.Report(deployment)
    first.add("credentials", checks.OK, compute.describe_credentials())
    project_setup.check_quota_project(first, compute.credentials, deployment.project_id)
    report.checks[:0] = first.checks
    env.say(*preflight.render(report))
    estimate = cost.estimate(deployment, cpus=report.cpus_per_node, memory_gb=report.memory_gb_per_node)
    env.say(*cost.render(estimate, local=LOCAL_ENV in env.environ))
    return report
