"""Preflight, then the cost, printed: what `gantry preflight` shows and `gantry apply` runs before it asks."""

from __future__ import annotations

from gantry import cost, preflight
from gantry.gcp import Compute, GoogleApis
from gantry.local_world import LOCAL_ENV
from gantry.preflight import checks, project_setup


def check_and_show(deployment, env) -> preflight.Report:
    """Run and print preflight (the credentials and their quota project first) and the cost estimate."""
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
