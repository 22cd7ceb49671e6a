"""What the config-taking verbs (train, launch, check) share: --config, the settings listed in their help, and
the config they load from both."""

from __future__ import annotations

import argparse
import dataclasses
import textwrap

from selfplay.config import SECTIONS, Config
from selfplay.config_io import load, resolve_config
from selfplay.record_keys import DEFAULT_CONFIG

FORMATTER = argparse.RawDescriptionHelpFormatter  # the settings list below keeps its lines


def settings_help() -> str:
    """Every section and key, for `selfplay train --help`; defaults, ranges and meanings are in config.py."""
    lines = ["settings: --section.key=value (e.g. --search.simulations=100) or the same keys in the YAML;",
             "defaults, allowed ranges and what each does: packages/selfplay/config.py"]
    for name, cls in SECTIONS.items():
        keys = ", ".join(f.name for f in dataclasses.fields(cls))
        lines += textwrap.wrap(f"{name}: {keys}", 100, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


def add_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=DEFAULT_CONFIG,
                        help=f"packaged config name or YAML path (default {DEFAULT_CONFIG})")


def load_config(args: argparse.Namespace, overrides: list[str]) -> Config:
    """--config's YAML with the --section.key=value overrides, refused with ConfigError as train refuses it."""
    return load(resolve_config(args.config), overrides)
