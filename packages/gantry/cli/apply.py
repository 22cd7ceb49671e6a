"""gantry apply: preflight, then terraform init + apply of infra/ with the user's tfvars."""

from __future__ import annotations

from dataclasses import replace

from gantry import config, cost
from gantry.errors import CheckFailed
from gantry.flows import apply as placement
from gantry.flows.readiness import check_and_show
from gantry.local_world import LOCAL_ENV
from gantry.status import ExitStatus
from gantry.terraform import Terraform

NAME = "apply"
HELP = "preflight, then create the deployment with terraform (starts billing until destroy)"
DESCRIPTION = """\
Create (or update) the deployment in infra/terraform.tfvars: run preflight, then
`terraform init` and `terraform apply` in infra/, streaming Terraform's output. From
then on the nodes bill by the hour until `make destroy` (or until max_run_hours, when
it is set). Running it again is safe: Terraform only changes what differs.

A stock-out (zone has no capacity for the shape) moves the nodes to the next zone of
fallback_zones, while no node exists yet; once they exist there, later applies keep
them there until `make destroy`. If apply fails half-way (a stock-out with no zone
left, a quota), what Terraform already created is listed: run `make apply` again once
fixed, or `make destroy` to remove it.

Before Terraform runs it says what it will create and what that bills per hour, and asks
at a terminal; -y does not ask. Without a terminal (a script) and without -y it refuses,
with nothing created: the verb that starts billing goes on only when someone said yes.

examples:
  gantry apply
  gantry apply -y                    # no question (a script)
  make apply
  make apply ARGS=-y
  gantry apply --skip-preflight      # when preflight cannot see a quota you know you have
"""


def add_arguments(parser) -> None:
    parser.add_argument("--skip-preflight", action="store_true",
                        help="do not run the Compute API checks first (Terraform still fails on real problems)")
    parser.add_argument("-y", "--yes", action="store_true",
                        help="do not ask before creating (scripts: without a terminal and -y apply refuses)")


def run(args, env) -> ExitStatus:
    deployment = config.load(args.var_file, args.infra_dir)
    if args.skip_preflight:
        estimate = cost.estimate(deployment)
        env.say(*cost.render(estimate, local=LOCAL_ENV in env.environ))
    else:
        report = check_and_show(deployment, env)
        if report.failed:
            raise CheckFailed(f"preflight found {len(report.failed)} blocker(s); nothing was created",
                              "Apply the fixes listed above, then `make apply` again.")
        estimate = cost.estimate(deployment, cpus=report.cpus_per_node, memory_gb=report.memory_gb_per_node)
    confirm(deployment, estimate, args, env)
    tf = Terraform(args.infra_dir, stdout=env.stdout, stderr=env.stderr)
    env.say("", f"== terraform init ({tf.working_dir}) ==")
    tf.init()
    zones = placement.zones_to_try(deployment, tf.outputs(), env)
    env.say("", f"== terraform apply -var-file={args.var_file} ==")
    placed = placement.apply_in_zones(tf, args.var_file, deployment, zones, env)
    outputs = tf.outputs()
    estimate = cost.estimate(deployment)
    env.say("", f"Created {replace(deployment, zone=placed).describe()}.")
    if placed != deployment.zone:
        env.say(f"  zone {deployment.zone} had no capacity, so the nodes are in {placed} (fallback_zones); later "
                "`make apply`s keep them there until `make destroy` (with terraform itself, pass "
                f"-var zone={placed}).")
    for key in ("node_names", "bucket", "image_repository_url"):
        if key in outputs:
            env.say(f"  {key}: {outputs[key]}")
    if LOCAL_ENV in env.environ:
        env.say("Billing: none, these nodes are containers on this machine (the local cloud).")
    elif estimate.hourly is not None:
        env.say(f"Billing now: about ${estimate.hourly:.2f}/h until `make destroy`.")
    env.say("Next: `make build-train` (builds the image and pushes it to the deployment's repository), "
            "then `make run-gcp` (training).")
    return ExitStatus.OK


def confirm(d, estimate, args, env) -> None:
    """Say what apply creates and what it bills, then ask (SkyPilot's launch: the cost before the question); -y
    goes on, no terminal refuses: the one verb that starts billing is the strictest."""
    nodes = f"{d.node_count} x {f'{d.tpu_type} TPU VM' if d.use_tpu else d.shape} ({'Spot' if d.spot else 'on-demand'})"
    env.say("", f"To create in project {d.project_id}, zone {d.zone}: {nodes}, and the network, service account, "
                "image registry and bucket they use.")
    if LOCAL_ENV in env.environ:
        env.say("Billing: none, the local cloud's nodes are containers on this machine"
                + (f" (on Google Cloud: ${estimate.hourly:.2f}/h)." if estimate.hourly is not None else "."))
    elif estimate.hourly is not None:
        env.say(f"Billing: ${estimate.node_hourly:.2f}/h per node, ${estimate.hourly:.2f}/h in total, from now until "
                f"the nodes power off or `make destroy`" + (" (free under a TRC allocation)." if estimate.free_under_trc
                                                               else "."))
    question = "Create its nodes here?" if LOCAL_ENV in env.environ else "Create it and start billing?"
    env.confirm_or_refuse(question, yes=args.yes, verb="apply", nothing="nothing was created")
