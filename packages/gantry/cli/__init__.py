"""The gantry CLI: one module per verb, a thin layer over the library modules.

Every verb module has NAME, HELP (one line for `gantry --help`), DESCRIPTION (what
happens and what it costs, then examples), ``add_arguments(parser)`` and
``run(args, env) -> ExitStatus``; an optional UNKNOWN_HINT (a string, or a function of the
unknown words) ends the verb's usage error for a flag it does not know. Known failures are GantryError: printed as one line
``gantry: error: <what>. <fix>`` on stderr; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gantry import local_world
from gantry.cli import (
    apply,
    build,
    cost,
    destroy,
    devcontainer,
    fetch,
    logs,
    preflight,
    push,
    run,
    run_local,
    status,
    stop,
)
from gantry.config import DEFAULT_INFRA_DIR
from gantry.errors import GantryError, missing_cloud_extra
from gantry.status import ExitStatus

# the order of `gantry --help` and of the user's journey
VERBS = [preflight, cost, apply, build, push, run, status, logs, stop, fetch, destroy, devcontainer, run_local]

DESCRIPTION = """\
Take the self-play trainer to Google Cloud and back. Settings live in
infra/terraform.tfvars (copy infra/terraform.tfvars.example and set project_id).

The journey, one make target per step:
  make preflight    check credentials, API, shape and quotas; print $/h    (creates nothing)
  make apply        preflight, then terraform init + apply of infra/       (starts billing)
  make build-train  build the trainer image and push it to the deployment's registry
  make run-gcp      start a run on every node, then follow it              (Ctrl-C detaches)
  make status       per-node state, step, last line, figures  (make logs / make stop / make fetch RUN=...)
  make destroy      terraform destroy, then list anything still billing   (stops billing)
"""

EPILOG = """\
examples:
  gantry preflight                      # is everything in place for `make apply`?
  gantry cost                           # $/h of the deployment in infra/terraform.tfvars
  gantry apply                          # create it (nodes bill until destroy)
  gantry build                          # build the image and push it to the deployment's repository
  gantry run --max-minutes 60           # train on every node for an hour; Ctrl-C detaches, the run goes on
  gantry fetch RUN_ID                   # the run's folder and each node's --sync folders into runs/RUN_ID
  gantry destroy -y                     # remove it without asking; the run data bucket is kept
"""


@dataclass
class Environment:
    """The CLI's outside world; tests pass their own streams and variables."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)

    def say(self, *lines: str) -> None:
        for line in lines:
            print(line, file=self.stdout, flush=True)

    def confirm(self, question: str) -> bool:
        if not self.stdin.isatty():
            return False
        print(f"{question} [y/N] ", end="", file=self.stdout, flush=True)
        return self.stdin.readline().strip().lower() in ("y", "yes")

    def confirm_or_refuse(self, question: str, *, yes: bool, verb: str, nothing: str, flag: str = "-y",
                          make: str = "") -> None:
        """The one way a verb that bills or deletes asks (apply, destroy, stop; run's --replace): ``yes`` (the
        verb's -y) goes on without asking; else a terminal is asked ``question``, and any answer but y refuses;
        without a terminal (a script, `make apply < /dev/null`) it refuses at once, since no one said yes. A
        refusal is one GantryError line: what did not happen (``nothing``, e.g. "nothing was created") and the
        flag that goes on without the question (``make``: the make target that runs the verb)."""
        if yes:
            return
        make = make or f"make {verb}"
        if not self.stdin.isatty():
            raise GantryError(f"{verb} asks before it goes on and stdin is not a terminal; {nothing}",
                              f"Run it at a terminal, or pass {flag} to go on without the question "
                              f"(`{make} ARGS={flag}`).")
        if not self.confirm(question):
            raise GantryError(f"{verb} cancelled; {nothing}",
                              f"Run `{make}` again and answer y, or `{make} ARGS={flag}` to skip the question.")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gantry", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--infra-dir", type=Path, default=DEFAULT_INFRA_DIR,
                        help="the Terraform root module (default: %(default)s)")
    common.add_argument("--var-file", type=Path, default=None,
                        help="the settings file (default: INFRA_DIR/terraform.tfvars)")
    common.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb in VERBS:
        # The examples go after the options, so that help ends with them.
        description, _, examples = verb.DESCRIPTION.partition("\nexamples:\n")
        sub = verbs.add_parser(verb.NAME, help=verb.HELP, description=description, parents=[common],
                               epilog=f"examples:\n{examples}" if examples else None,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        verb.add_arguments(sub)
        sub.set_defaults(run=verb.run, verb_parser=sub, unknown_hint=getattr(verb, "UNKNOWN_HINT", ""))
    return parser


def main(argv: list[str] | None = None, env: Environment | None = None) -> ExitStatus:
    env = env or Environment()
    try:
        args, unknown = build_parser().parse_known_args(argv)
        if unknown:  # the verb's usage, not gantry's: the top parser would show `gantry [-h] VERB ...`
            hint = args.unknown_hint(unknown) if callable(args.unknown_hint) else args.unknown_hint
            args.verb_parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return ExitStatus(exit_.code or 0)
    if args.var_file is None:
        args.var_file = args.infra_dir / "terraform.tfvars"
    try:
        env = _in_local_cloud(args, env)
        return args.run(args, env)
    except GantryError as error:
        if args.debug:
            traceback.print_exc(file=env.stderr)
        if error.detail:
            print(error.detail, file=env.stderr)
        print(f"gantry: error: {error.line()}", file=env.stderr, flush=True)
        return error.status
    except Exception as error:  # a bug or an unexpected API answer: one line, traceback on --debug
        if args.debug:
            raise
        if isinstance(error, ModuleNotFoundError) and (hint := missing_cloud_extra(error)) is not None:
            print(f"gantry: error: {hint.line()}", file=env.stderr, flush=True)  # a verb's lazy google import
            return hint.status
        print(f"gantry: error: {type(error).__name__}: {error}. Rerun with --debug for the traceback.",
              file=env.stderr, flush=True)
        return ExitStatus.ERROR


def _in_local_cloud(args, env: Environment) -> Environment:
    """While `make local-cloud` is up, every verb talks to it (its deployment folder, its endpoints) and says so
    first; otherwise to Google Cloud, unchanged (gantry.local_world)."""
    world = local_world.current(local_world.folder_of(env.environ))
    if world is None:
        return env
    args.infra_dir, args.var_file = Path(world.infra_dir), world.var_file
    os.environ.update(world.environ)  # gcsfs and google-cloud-storage in this process read the bucket's endpoint here
    print(world.banner(), file=env.stderr, flush=True)
    return dataclasses.replace(env, environ={**env.environ, **world.environ, local_world.LOCAL_ENV: world.infra_dir})
