"""An image to the deployment's repository: the trainer's or a project's, in the flavour the settings (or --gpu,
--tpu, --cpu) choose; what `gantry push`, `gantry build` and `gantry devcontainer` share."""

from __future__ import annotations

from gantry import images, projects
from gantry.gcp import registry
from gantry.status import ExitStatus
from gantry.terraform import Terraform


def add_flavour_arguments(parser) -> None:
    """--gpu / --tpu / --cpu: which image, whatever infra/terraform.tfvars says."""
    flavour = parser.add_mutually_exclusive_group()
    flavour.add_argument("--gpu", dest="flavour", action="store_const", const="cuda", default=None,
                         help="the CUDA image, whatever use_gpu says")
    flavour.add_argument("--tpu", dest="flavour", action="store_const", const="tpu",
                         help="the TPU image (torch_xla), whatever use_tpu says")
    flavour.add_argument("--cpu", dest="flavour", action="store_const", const="cpu", help="the CPU image")


def chosen_flavour(args) -> str:
    """--gpu / --tpu / --cpu, else use_tpu and use_gpu from the settings file (CPU when it is absent)."""
    return args.flavour or images.flavour_from_tfvars(args.var_file, args.infra_dir)


def publish(args, env, flavour: str, built_only_if_undeployed: bool = False, project=None) -> ExitStatus:
    """Push the local image (the trainer's, or ``project``'s: gantry.projects names both tags) to the deployment's
    repository; say what `gantry run` will launch."""
    repository = str(Terraform(args.infra_dir, stdout=env.stdout, stderr=env.stderr).outputs()
                     .get("image_repository_url") or "")
    if not repository:
        fix = "Run `make apply` first, then `make build-train` again."
        if built_only_if_undeployed:  # building before the deployment exists is fine: train-docker uses it
            env.say(f"Not pushed: no deployment in {args.infra_dir} yet. {fix}")
            return ExitStatus.OK
        raise registry.RegistryError(f"no image repository: terraform output in {args.infra_dir} has none", fix)
    if project is None:
        local, target = images.local_tag(flavour), images.repository_image(repository, flavour)
        launch = "`make run-gcp` runs this digest on every node"
    else:
        local, target = projects.local_ref(project, flavour), projects.image_ref(repository, project, flavour)
        launch = f"`gantry run --project {project} -- COMMAND` runs it on every node"
    host, name, tag = registry.split_reference(target)
    env.say(f"gantry: pushing {local} to {target}")
    pushed = registry.push(local, f"{host}/{name}", tag, registry.push_auth(host), env.say)
    env.say(f"Pushed {pushed}. {launch}.")
    return ExitStatus.OK
