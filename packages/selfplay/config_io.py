"""Configs in and out: YAML files (a path or a packaged config's name), ``--section.key=value`` flags and the
dicts checkpoints save, each checked for its shape and coerced to the fields' types, then validated by the
sections' own ``__post_init__`` (config.py); and the YAML a run records."""

from __future__ import annotations

import dataclasses
import difflib
import math
from pathlib import Path
from typing import Literal, get_origin

import yaml

from .config import RETIRED_KEYS, SECTIONS, Config, require, type_hints
from .errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "configs"


def _coerce(section: str, key: str, raw) -> object:
    """A YAML or flag value as the field's declared type; its range and choices are the section's to check."""
    where = f"{section}.{key}"
    hint = type_hints(SECTIONS[section])[key]
    require(isinstance(raw, (str, int, float)), f"{where}={raw!r} must be a single value, not "
                                                f"{'nothing' if raw is None else type(raw).__name__}")
    if get_origin(hint) is Literal:
        return raw
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).lower()
        require(text in ("true", "false", "1", "0", "yes", "no"), f"{where}={raw!r} must be true or false")
        return text in ("true", "1", "yes")
    if hint in (int, float):
        if isinstance(raw, bool):
            raise ConfigError(f"{where}={raw!r} must be a number")
        allowed = next((f.metadata["range"] for f in dataclasses.fields(SECTIONS[section])
                        if f.name == key and "range" in f.metadata), None)
        wanted = f"{'an integer' if hint is int else 'a number'}" + (f" in {allowed}" if allowed else "")
        try:  # an integer may be written as one (10000) or in a float's notation that is whole (1e4, 10000.0)
            value = int(raw) if hint is int and isinstance(raw, (int, str)) and str(raw).strip().lstrip("+-").isdigit() \
                else float(raw)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{where}={raw!r} must be {wanted}") from None
        if hint is float:
            return value
        if not math.isfinite(value) or value != int(value):
            raise ConfigError(f"{where}={raw!r} must be {wanted}")
        return int(value)
    return str(raw)


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def check_shape(data, source: str) -> dict:
    """``data`` as {section: {key: value}}, or one line naming what is off in ``source`` (a file, the flags).

    Runs before anything is merged, so a scalar where a section belongs, or a misspelt name, is
    reported as such instead of surfacing as a TypeError deep inside the merge."""
    data = {} if data is None else data
    require(isinstance(data, dict), f"{source} must hold a mapping of sections (game:, model:, search:, ...), "
                                   f"not {type(data).__name__}")
    for name, values in data.items():
        require(name in SECTIONS, f"unknown config section {name!r} in {source}: {_did_you_mean(str(name), SECTIONS)}"
                                 f"sections are {', '.join(SECTIONS)}")
        require(values is None or isinstance(values, dict),
               f"config section {name!r} in {source} is {values!r}: it must be a mapping of keys, e.g. "
               f"{name}: {{{dataclasses.fields(SECTIONS[name])[0].name}: ...}}")
        known = [f.name for f in dataclasses.fields(SECTIONS[name])]
        for key in values or {}:
            require(key in known or f"{name}.{key}" in RETIRED_KEYS,
                   f"unknown key {_dotted(name, key)} in {source}: {_did_you_mean(str(key), known)}"
                   f"valid keys are {', '.join(known)}")
    return {name: dict(values or {}) for name, values in data.items()}


def _dotted(section: str, key) -> str:
    """section.key as a user typed it, quoted when the key holds anything but a name (a newline would
    otherwise split the one-line error)."""
    return f"{section}.{key}" if str(key).isidentifier() else repr(f"{section}.{key}")


def from_dict(data: dict | None) -> Config:
    """Build a Config from nested dicts, rejecting unknown sections and keys."""
    sections = {}
    for name, values in check_shape(data, "the config").items():
        kwargs = {key: _coerce(name, key, raw) for key, raw in values.items()
                  if f"{name}.{key}" not in RETIRED_KEYS}
        sections[name] = SECTIONS[name](**kwargs)
    return Config(**sections)


def parse_overrides(args: list[str]) -> dict:
    """``['--search.simulations=100', ...]`` -> {'search': {'simulations': '100'}}."""
    out: dict = {}
    for arg in args:
        body = arg.removeprefix("--")
        require("=" in body and "." in body.split("=", 1)[0],
               f"bad override {arg!r}: write --section.key=value, e.g. --search.simulations=100")
        dotted, value = body.split("=", 1)
        section, key = dotted.split(".", 1)
        out.setdefault(section, {})[key] = value
    return out


def merge(base: dict, extra: dict) -> dict:
    """Two checked configs ({section: {key: value}}), the later winning key by key."""
    out = {k: dict(v) for k, v in base.items()}
    for section, values in extra.items():
        out.setdefault(section, {}).update(values)
    return out


def packaged_configs() -> list[str]:
    """The names of the configs under packages/selfplay/configs/, which every image carries."""
    return sorted(q.stem for q in CONFIG_DIR.glob("*.yaml"))


def resolve_config(name_or_path: str) -> Path:
    """A YAML path, or the name of a packaged config (connect4, tictactoe)."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    packaged = CONFIG_DIR / f"{name_or_path}.yaml"
    if packaged.is_file():
        return packaged
    names = ", ".join(packaged_configs())
    raise ConfigError(f"config {name_or_path!r} is neither a file nor a packaged config: choose one of {names} "
                      f"or pass a path to a YAML file")


def load(path: str | Path | None, overrides: list[str] = ()) -> Config:
    """Read YAML (optional), apply overrides, validate."""
    data: dict = {}
    if path:
        p = Path(path)
        require(not p.is_dir(), f"config {str(p)!r} is a folder: pass --config a YAML file in it, or a packaged "
                               f"config name (see packages/selfplay/configs/)")
        require(p.is_file(), f"config file {str(p)!r} not found: pass --config with an existing YAML file "
                            f"(see packages/selfplay/configs/)")
        try:
            text = p.read_text()
            twice = duplicated(yaml.compose(text, Loader=yaml.SafeLoader))
            require(twice is None, f"config file {str(p)!r} {twice}")
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark else ""
            # PyYAML's scanner refuses a tab as "found character '\\t' that cannot start any token"
            if mark is not None and "'\\t'" in str(getattr(e, "problem", "")):
                raise ConfigError(f"config file {str(p)!r} has a tab{where}, column {mark.column + 1}: YAML indents "
                                  f"with spaces only; replace the tab with spaces") from None
            raise ConfigError(f"config file {str(p)!r} is not valid YAML{where}: fix the syntax") from None
        require(data is not None, f"config file {str(p)!r} is empty (no settings, only comments or nothing): "
                                  f"write its sections (game:, model:, ...), or pass a packaged config such as "
                                  f"--config connect4")
        data = check_shape(data, f"config file {str(p)!r}")
    merged = merge(data, check_shape(parse_overrides(list(overrides)), "the --section.key=value flags"))
    for dotted, replacement in RETIRED_KEYS.items():
        section, key = dotted.split(".")
        require(key not in (merged.get(section) or {}), f"{dotted} is no longer a setting: use {replacement}")
    return from_dict(merged)


def duplicated(root) -> str | None:
    """What a YAML document (its composed node tree) names twice: a section, or a key within one, with both lines.
    YAML keeps the second silently, which drops a whole section's first half; Terraform refuses the same mistake."""
    def first_repeat(node):
        seen: dict = {}
        for key, _ in node.value:
            if key.value in seen:
                return key.value, seen[key.value], key.start_mark.line + 1
            seen[key.value] = key.start_mark.line + 1
        return None

    if not isinstance(root, yaml.MappingNode):
        return None
    if repeat := first_repeat(root):
        return f"has section {repeat[0]} twice (lines {repeat[1]} and {repeat[2]}): merge them into one"
    for section, values in root.value:
        if isinstance(values, yaml.MappingNode) and (repeat := first_repeat(values)):
            return (f"sets {section.value}.{repeat[0]} twice (lines {repeat[1]} and {repeat[2]}): keep the one you "
                    "mean")
    return None


def with_legacy_shape(saved: dict) -> dict:
    """A checkpoint's saved config with the shape fields it predates filled in as they were then."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in saved.items()}
    for section, values in Config.LEGACY_SHAPE.items():
        for key, value in values.items():
            out.setdefault(section, {}).setdefault(key, value)
    return out


def dump(cfg: Config) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False)
