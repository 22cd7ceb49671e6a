"""gantry build (make build-train): build the trainer image for linux/amd64, then push it to the
deployment's Artifact Registry repository, where `gantry run` finds it."""

from __future__ import annotations

from pathlib import Path

from gantry import images
from gantry.cli import push
from gantry.status import ExitStatus

NAME = "build"
HELP = "build the trainer image (TPU if use_tpu, CUDA if use_gpu, else CPU) for linux/amd64 and push it to the deployment"
DESCRIPTION = """\
Build docker/Dockerfile (FLAVOUR=cuda when use_gpu = true), or docker/Dockerfile.tpu when
use_tpu = true, with the local Docker engine, for linux/amd64 (the nodes' platform, whatever this machine
is), as gantry-trainer:cpu, :cuda or :tpu. Then push it to the Artifact Registry repository that `make apply`
created, as REPO/gantry-trainer:cpu|cuda|tpu: `make run-gcp` pins the nodes to the digest the registry holds.
Storage in the repository bills per GB-month (the CPU image is ~1.2 GB). Before `make apply` there
is no repository: the image is built here only (`make train-docker` runs it).

examples:
  gantry build                                       # use_tpu / use_gpu from infra/terraform.tfvars
  gantry build --no-push                             # build here only
  gantry build --base-image gantry-base:bookworm     # no registry to pull the base from (make docker-base)
  make build-train ARGS="--ca-cert ~/corp-root.crt"
"""


def add_arguments(parser) -> None:
    push.add_arguments(parser)  # --gpu / --tpu / --cpu
    parser.add_argument("--no-push", action="store_true", help="build only; push later with `gantry push`")
    parser.add_argument("--base-image", help="BASE_IMAGE build arg (e.g. gantry-base:bookworm from make docker-base)")
    parser.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE", help="any build arg")
    parser.add_argument("--wheel-dir", type=Path, default=None,
                        help="local wheels tried before any index (default: GANTRY_WHEEL_DIR or pip's find-links)")
    parser.add_argument("--no-wheels", action="store_true", help="take torch from TORCH_INDEX_URL only")
    parser.add_argument("--ca-cert", action="append", type=Path, default=[],
                        help="extra CA certificate (PEM) to trust in the build and the image; repeatable")
    parser.add_argument("--no-host-ca-certs", action="store_true",
                        help=f"do not add this host's locally added CAs ({images.HOST_CA_DIR}/*.crt)")
    parser.add_argument("--network", default="host", help="network for RUN steps (default host; 'default' = engine's)")
    parser.add_argument("--no-cache", action="store_true", help="rebuild every layer")


def build_args(items: list[str], base_image: str | None) -> dict[str, str]:
    parsed = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise images.ImageBuildError(f"--build-arg {item!r} has no '='", "Write --build-arg KEY=VALUE.")
        parsed[key] = value
    if base_image:
        parsed["BASE_IMAGE"] = base_image
    return parsed


def run(args, env) -> ExitStatus:
    flavour = push.chosen_flavour(args)
    tag = images.local_tag(flavour)
    wheel_dir = None if args.no_wheels else (args.wheel_dir or images.default_wheel_dir())
    certs = ([] if args.no_host_ca_certs else images.default_ca_certs()) + args.ca_cert
    image_id = images.build_image(flavour, tag, build_args(args.build_arg, args.base_image), env.say,
                                  wheel_dir=wheel_dir, ca_certs=certs,
                                  network_mode=None if args.network == "default" else args.network,
                                  nocache=args.no_cache)
    env.say(f"gantry: built {tag} ({image_id[:19]}, {images.image_size_mb(tag):.0f} MB, {images.PLATFORM})")
    if args.no_push:
        env.say("Not pushed (--no-push). Push it with `make push-train` before `make run-gcp`.")
        return ExitStatus.OK
    return push.publish(args, env, flavour, built_only_if_undeployed=True)
