"""selfplay check: the config and flags as `train` would take them, then exit (the kit's gantry.yaml names it as the
check `gantry run` runs before any node starts).

With --resume it also reads run.dir's newest checkpoint and refuses, as train would, settings that cannot continue
it. --for-node judges as a node will: only the configs packaged in its image are there, and run.dir is a --sync
folder of the launch; `gantry run --resume` gives the check the run's bucket folder (GANTRY_RUN_DIR), and the
checkpoint read is node 0's copy of run.dir there (launch_contract.sync_url), so a net shape that changed since the
run began costs a download, not a billed node and a crash loop."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from launch_contract import RUN_DIR_ENV, check_relative, sync_url

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
    parser.add_argument("--resume", action="store_true", help="also read run.dir's newest checkpoint and refuse, as "
                        "train would, settings that cannot continue it")
    parser.add_argument("--for-node", action="store_true", help="judge as a node will: --config a packaged name "
                        "(a node's image holds only those), run.dir a folder relative to the working directory (a "
                        f"--sync folder), and when {RUN_DIR_ENV} names the run's bucket folder, node 0's copy of "
                        "run.dir there read as --resume reads it")


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
    if args.for_node:
        named = list(dict.fromkeys(o.partition("=")[2] for o in overrides if o.startswith("--run.dir=")))
        if len(named) > 1:  # the check's own (gantry.yaml's, the launch's sync folder), then the user's
            raise ConfigError(f"run.dir is {named[0]} on a node (the folder its agent keeps in the bucket) and "
                              f"{named[-1]} by your flags: the trainer would write a folder nothing copies; drop "
                              "--run.dir (make fetch brings the run folder home)")
        try:
            check_relative(cfg.run.dir, "run.dir")
        except ValueError as e:
            raise ConfigError(f"{e}: on a node it is a --sync folder, relative to the working directory (the "
                              "kit's gantry.yaml: trainer)") from None
    print(f"config ok: {args.config} ({cfg.game.name})", flush=True)
    bucket = os.environ.get(RUN_DIR_ENV) if args.for_node else None
    if bucket:
        print(newest_checkpoint_resumes(cfg, sync_url(bucket, 0, cfg.run.dir)), flush=True)
    elif args.resume:  # the last line: what gantry run says of the resume
        print(newest_checkpoint_resumes(cfg, cfg.run.dir), flush=True)
    return ExitStatus.OK


def newest_checkpoint_resumes(cfg: Config, where: str) -> str:
    """What train would resume from the run folder ``where``, checked as train checks it: a folder here, or its copy
    in a bucket (gs://, read with the launcher's gcsfs into a temporary folder, gone afterwards)."""
    from selfplay import checkpoint  # torch, only when asked

    if "://" not in where:
        newest = checkpoint.latest(where)
        if newest is None:
            return f"starts at step 0: no checkpoint in {where} yet"
        saved = checkpoint.load(newest)
        checkpoint.check_resumes(saved, cfg, str(newest))
        return f"resumes from {newest.name} at step {saved.step}, its game and net checked"
    import fsspec

    fs, root = fsspec.core.url_to_fs(where)
    try:
        names = sorted(Path(p).name for p in fs.ls(root, detail=False))
    except FileNotFoundError:
        names = []
    newest = max((n for n in names if checkpoint.NAME.match(n)), default=None)  # ckpt-<9 digits>.pt
    if newest is None:
        return f"starts at step 0: no checkpoint in {where} yet"
    shown = f"{where.rstrip('/')}/{newest}"
    with tempfile.TemporaryDirectory(prefix="selfplay-check-") as copy:
        local = Path(copy) / newest
        fs.get(f"{root}/{newest}", str(local))
        saved = checkpoint.load(local, shown_as=shown)  # refusals name it where the user keeps it, not the copy
    checkpoint.check_resumes(saved, cfg, shown)
    return f"resumes from {newest} at step {saved.step}, its game and net checked"
