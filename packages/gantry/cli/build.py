"""gantry build (make build-train): build the trainer image for linux/amd64, then push it to the
deployment's Artifact Registry repository, where `gantry run` finds it."""

from __future__ import annotations

from pathlib import Path

from gantry import images
from gantry.errors import GantryError
from gantry.flows import publish
from gantry.projects import build as project_build
from gantry.projects import context as project_context
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

With --project DIR, build your own project folder instead (a Dockerfile of its own, else its
pyproject.toml's dependencies, else its requirements.txt, on the kit's base and torch of the deployment's
flavour), tagged NAME:FLAVOUR-VERSION[-KIT] (VERSION: its git commit when clean, else a hash of the files
sent; KIT: a hash of the kit's torch pins and Dockerfile, where gantry writes the project's Dockerfile),
and push it to the same repository, where `gantry run --project DIR -- COMMAND` finds it. What the build
sends honours the project's .dockerignore and .gitignore; .git, virtual environments and __pycache__ stay out.

examples:
  gantry build                                       # use_tpu / use_gpu from infra/terraform.tfvars
  gantry build --project ../my-trainer               # your own project (make build-train PROJECT=../my-trainer)
  gantry build --project ../my-trainer --no-push --max-context-mb 2000
  gantry build --project ../my-trainer --dockerfile docker/Dockerfile.pytorch
  gantry build --no-push                             # build here only
  gantry build --base-image gantry-base:bookworm     # no registry to pull the base from (make docker-base)
  make build-train ARGS="--ca-cert ~/corp-root.crt"
"""


def add_arguments(parser) -> None:
    publish.add_flavour_arguments(parser)
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
    parser.add_argument("--project", type=Path, default=None, metavar="DIR",
                        help="build your own project folder (Dockerfile, pyproject.toml or requirements.txt)")
    parser.add_argument("--dockerfile", type=Path, default=None, metavar="PATH",
                        help="with --project: the project's own Dockerfile at PATH inside it (default: DIR/Dockerfile "
                        "if there is one); its FROM is the base, BASE_IMAGE only where it declares ARG BASE_IMAGE")
    parser.add_argument("--max-context-mb", type=float, default=project_context.DEFAULT_MAX_CONTEXT_MB,
                        help="refuse a --project build context bigger than this (default: %(default)s)")


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
    flavour = publish.chosen_flavour(args)
    tag = images.local_tag(flavour)
    wheel_dir = None if args.no_wheels else (args.wheel_dir or images.default_wheel_dir())
    certs = images.check_ca_certs(([] if args.no_host_ca_certs else images.default_ca_certs()) + args.ca_cert)
    if args.project is not None:
        return build_project(args, env, flavour, wheel_dir, certs)
    if args.dockerfile is not None:
        raise GantryError(f"--dockerfile {args.dockerfile} names your project's Dockerfile, and no --project is given",
                          "Add --project DIR (make build-train PROJECT=DIR ARGS=\"--dockerfile PATH\"); the kit's "
                          "image is built from docker/Dockerfile")
    image_id = images.build_image(flavour, tag, build_args(args.build_arg, args.base_image), env.say,
                                  wheel_dir=wheel_dir, ca_certs=certs,
                                  network_mode=None if args.network == "default" else args.network,
                                  nocache=args.no_cache)
    env.say(f"gantry: built {tag} ({image_id[:19]}, {images.image_size_mb(tag):.0f} MB, {images.PLATFORM})")
    if args.no_push:
        env.say("Not pushed (--no-push). Push it with `make push-train` before `make run-gcp`.")
        return ExitStatus.OK
    return publish.publish(args, env, flavour, built_only_if_undeployed=True)


def build_project(args, env, flavour: str, wheel_dir: Path | None, certs: list[Path]) -> ExitStatus:
    built = project_build.build(args.project, flavour, env.say, max_context_mb=args.max_context_mb,
                                build_args=build_args(args.build_arg, args.base_image), wheel_dir=wheel_dir,
                                ca_certs=certs, network_mode=None if args.network == "default" else args.network,
                                nocache=args.no_cache, dockerfile=args.dockerfile)
    env.say(f"gantry: built {built.tag} in {built.seconds:.0f} s ({built.image_id[:19]}, "
            f"{images.image_size_mb(built.tag):.0f} MB, {images.PLATFORM})")
    if args.no_push:
        env.say(f"Not pushed (--no-push). Build without it to push before `gantry run --project {args.project}`.")
        return ExitStatus.OK
    return publish.publish(args, env, flavour, built_only_if_undeployed=True, project=args.project)
