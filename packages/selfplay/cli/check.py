"""selfplay check: the config and flags as `train` would take them, then exit (the kit's gantry.yaml names it as the
check `gantry run` runs before any node starts).

With --resume it also reads run.dir's newest checkpoint (from the bucket for a gs:// run.dir) and refuses, as train
would on the node, settings that cannot continue it: `gantry run --resume` gives the check the run's folder
(GANTRY_RUN_DIR), so a net shape that changed since the run began costs a download, not a billed node and a crash
loop. --for-node judges as a node will: only the configs packaged in its image are there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from launch_contract import RUN_DIR_ENV

from selfplay.cli.options import add_config_argument, load_config, settings_help
from selfplay.config import Config
from selfplay.config_io import packaged_configs
from selfplay.errors import ConfigError, ExitStatus

NAME = "check"
HELP = "check the config and flags as train would, then exit (0: fine, 1 or 2: refused)"
DESCRIPTION = HELP
EPILOG = settings_help()
TAKES_OVERRIDES = True  # --section.key=value settings; the help lists them, unwrapped


def add_arguments(parser) -> None:
    add_config_argument(parser)
    parser.add_argument("--resume", action="store_true", help="also read run.dir's newest checkpoint (a gs:// "
                        "run.dir's from its bucket) and refuse, as train would, settings that cannot continue it")
    parser.add_argument("--for-node", action="store_true", help="judge as a node will: --config a packaged name "
                        f"(a node's image holds only those), and --resume when {RUN_DIR_ENV} names the run's folder")


def run(args, overrides) -> int:
    """Refused the same way as train; without --resume nothing is written or imported beyond the config (no
    torch: quick)."""
    if args.for_node and args.config not in packaged_configs():
        names = ", ".join(packaged_configs())
        where = "is a file on this machine" if Path(args.config).exists() else "is not a packaged config"
        raise ConfigError(f"--config {args.config} {where}; a node's image holds only the packaged configs "
                          f"({names}): pass its settings as flags (--search.simulations=100), or add it under "
                          "packages/selfplay/configs/ and `make build-train`")
    cfg = load_config(args, overrides)
    print(f"config ok: {args.config} ({cfg.game.name})", flush=True)
    if args.resume or (args.for_node and os.environ.get(RUN_DIR_ENV)):
        print(newest_checkpoint_resumes(cfg), flush=True)  # the last line: what gantry run says of the resume
    return ExitStatus.OK


def newest_checkpoint_resumes(cfg: Config) -> str:
    """What train would resume from run.dir, checked as train checks it; a remote one is read into a temporary
    folder, gone afterwards."""
    from selfplay import checkpoint  # torch, only when asked
    from selfplay.rundir import RunDir

    with tempfile.TemporaryDirectory(prefix="selfplay-check-") as staging:
        run_dir = RunDir(cfg.run.dir, staging_root=staging)
        run_dir.pull()
        newest = checkpoint.latest(run_dir.local)
        if newest is None:
            return "starts at step 0: no checkpoint in run.dir yet"
        where = f"{cfg.run.dir.rstrip('/')}/{newest.name}" if run_dir.remote else str(newest)
        saved = checkpoint.load(newest, shown_as=where)  # refusals name it where the user keeps it, not the copy
        checkpoint.check_resumes(saved, cfg, where)
        return f"resumes from {newest.name} at step {saved.step}, its game and net checked"
