"""gantry destroy: terraform destroy, then prove from the Compute API that nothing bills."""

from __future__ import annotations

from gantry import config, diagnose
from gantry.errors import TerraformError
from gantry.gcp import Compute, GoogleApis, bucket, inventory
from gantry.status import ExitStatus
from gantry.terraform import Terraform

NAME = "destroy"
HELP = "delete every VM, disk and network of the deployment, then list anything still billing"
DESCRIPTION = """\
Delete the deployment in infra/terraform.tfvars: `terraform destroy` of infra/ (VMs,
boot disks, network, NAT, service account, image repository), then an inventory of
the project through the APIs: instances, disks, addresses, buckets and image repositories
labelled gantry-deployment=<deployment_name>, the deployment's VPC with its subnetworks,
firewall rules and routers (Cloud NAT), and its service account. It ends with "nothing left
billing" or the exact leftovers and the commands that delete them (exit status 4).

The bucket with the run data (checkpoints, stats) is kept unless --delete-data: keeping
it costs about $0.02 per GB-month. Asks for confirmation unless -y.

examples:
  gantry destroy
  gantry destroy -y                   # no question (scripts, CI)
  gantry destroy -y --delete-data     # also delete the bucket and every checkpoint in it
  make destroy ARGS=-y
"""


def add_arguments(parser) -> None:
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--delete-data", action="store_true",
                        help="also empty and delete the runs bucket (checkpoints and stats are lost)")


def run(args, env) -> ExitStatus:
    deployment = config.load(args.var_file, args.infra_dir)
    data = "AND the bucket with every run's checkpoints" if args.delete_data else "(the run data bucket is kept)"
    env.confirm_or_refuse(f"Delete deployment {deployment.deployment_name!r} in project {deployment.project_id}: "
                          f"all its VMs, disks and network {data}?", yes=args.yes, verb="destroy",
                          nothing="nothing was destroyed")

    tf = Terraform(args.infra_dir, stdout=env.stdout, stderr=env.stderr)
    env.say(f"== terraform init ({tf.working_dir}) ==")
    tf.init()
    bucket_name = tf.outputs().get("bucket")
    if args.delete_data and bucket_name:
        count = bucket.empty(bucket_name, deployment.project_id, env.environ)
        env.say(f"Emptied gs://{bucket_name}: {count} object(s) deleted.")

    env.say("", "== terraform destroy ==")
    failure, bucket_kept = None, False
    try:
        tf.destroy(args.var_file)
    except TerraformError as error:
        if bucket_name and bucket.refused_because_not_empty(error.output):
            bucket_kept = True
        else:
            failure = error  # still take the inventory: the user must see what is left

    env.say("")
    kept = bucket_name if bucket_kept else ""
    taken = inventory.take(deployment, Compute.connect(env.environ), GoogleApis.connect(env.environ),
                           bucket=bucket_name or "")
    found = inventory.leftovers(taken, kept)
    env.say(*inventory.render(deployment, taken, kept))
    if bucket_kept:
        env.say(f"Kept: bucket gs://{bucket_name} with the run data (about $0.02/GB-month; `make fetch` copies "
                "it to runs/). Delete it with `make destroy ARGS=\"-y --delete-data\"`.")
    elif bucket_name and not taken.has("bucket", bucket_name) and "buckets" not in taken.unchecked:
        # only when the Storage API says it is gone: a failed destroy may have left it
        env.say(f"Deleted: bucket gs://{bucket_name} (it held no objects" +
                (", after --delete-data emptied it)." if args.delete_data else ")."))

    if failure is not None:
        known = diagnose.explain(failure.output, deployment)
        raise TerraformError(f"terraform destroy failed. {known.rstrip('.')}" if known else failure.what,
                             "The inventory above shows what still exists; fix the cause and run "
                             "`make destroy` again.", output=failure.output, returncode=failure.returncode)
    if found:
        print(f"gantry: error: {len(found)} resource(s) of deployment {deployment.deployment_name} still "
              "exist and bill. Delete them with the commands above.",
              file=env.stderr, flush=True)
        return ExitStatus.LEFTOVERS
    return ExitStatus.OK
