"""Every config field is checked from its declaration in config.py (#42): each field of each section, given a value
out of its range or of the wrong type, is refused in one line that names it, by the function `selfplay check`,
`train` and gantry's pre-flight all call (config_io.load); a few of them through the command line, with exit 2."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Literal, get_origin

import pytest
import yaml
from selfplay.config import SECTIONS, type_hints
from selfplay.config_io import load, resolve_config
from selfplay.errors import ConfigError

TICTACTOE = resolve_config("tictactoe")
# The text fields' values that their section's rules refuse (a number's and a choice's come from its declaration)
BAD_TEXT = {"game.name": "chess", "run.dir": "", "eval.arena_baselines": "random,alphabeta3"}


def fields():
    return [(section, f) for section, cls in SECTIONS.items() for f in dataclasses.fields(cls)]


def out_of_range(section: str, f: dataclasses.Field) -> list[str]:
    """Values just outside what the field declares, as a user types them after --section.key=."""
    hint = type_hints(SECTIONS[section])[f.name]
    if get_origin(hint) is Literal:
        return ["nonsense"]
    if "range" in f.metadata:
        r = f.metadata["range"]
        step = 1 if r.integer else 0.5
        below = r.low if r.low_open else r.low - step
        above = r.high if r.high_open else r.high + step
        return [str(below), str(above), *([] if r.integer else ["inf", "nan"])]
    return [BAD_TEXT[f"{section}.{f.name}"]] if f"{section}.{f.name}" in BAD_TEXT else []


def wrong_type(section: str, f: dataclasses.Field) -> list:
    """A list in the YAML for every field, and a word for a number."""
    hint = type_hints(SECTIONS[section])[f.name]
    return [[1, 2], *(["many"] if hint in (int, float) else [])]


def refused(section: str, key: str, path, overrides=()) -> str:
    with pytest.raises(ConfigError) as caught:
        load(path, list(overrides))
    line = str(caught.value)
    assert f"{section}.{key}" in line and "\n" not in line, line
    return line


def test_every_field_of_every_section_is_refused_out_of_range_or_of_the_wrong_type_naming_it(tmp_path):
    walked = 0
    for section, f in fields():
        for value in out_of_range(section, f):
            refused(section, f.name, TICTACTOE, [f"--{section}.{f.name}={value}"])
            walked += 1
        for value in wrong_type(section, f):
            path = tmp_path / f"{section}.{f.name}.yaml"
            path.write_text(yaml.safe_dump({section: {f.name: value}}))
            refused(section, f.name, path)
            walked += 1
    assert walked > 2 * len(fields())


def test_every_field_but_free_text_declares_what_it_allows():
    """A field added without a range or choices is caught here, not by a traceback on a billing node."""
    free = {f"{s}.{f.name}" for s, f in fields() if not out_of_range(s, f)}
    assert free == {"eval.pons_dir"}  # a folder on the node, which the laptop cannot see


def test_every_default_is_inside_its_declaration():
    for section, cls in SECTIONS.items():
        cls()  # __post_init__ checks the defaults as it checks any value
        for f in dataclasses.fields(cls):
            if "range" in f.metadata:
                f.metadata["range"].check(f"{section}.{f.name}", f.default)


def selfplay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfplay", *args], capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize("flag, line", [
    ("--run.seed=-1", "run.seed=-1 must be in 0..4294967295"),
    ("--dist.timeout_s=inf", "dist.timeout_s=inf must be in (0, 86400]"),
    ("--learner.precision=fp8", "learner.precision='fp8' is not allowed: choose one of auto, fp32, bf16, fp16"),
    ("--run.max_minutes=nan", "run.max_minutes=nan must be in [0, 1000000] (0 = no limit)"),
])
def test_check_and_train_refuse_a_field_out_of_range_in_the_same_one_line(flag, line):
    for verb in ("check", "train"):
        result = selfplay(verb, "--config", "tictactoe", flag)
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr.splitlines() == [f"selfplay: error: {line}"], result.stderr
        assert "config ok" not in result.stdout


@pytest.mark.parametrize("text", ["", "# only a comment\n\n   # and another\n"])
def test_an_empty_config_file_is_refused_not_read_as_connect4_with_defaults(tmp_path, text):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    result = selfplay("check", "--config", str(path))
    assert result.returncode == 2 and "config ok" not in result.stdout
    said = (f"selfplay: error: config file '{path}' is empty (no settings, only comments or nothing): write its "
            "sections (game:, model:, ...), or pass a packaged config such as --config connect4")
    assert result.stderr.splitlines() == [said], result.stderr
