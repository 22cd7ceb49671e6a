"""`make help` is the map of the targets: grouped Local / Cloud / Development in the user's order, with the
variables, and every documented target in exactly one group (the maintainers' only in `make help-all`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKEFILES = [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]
USER_GROUPS = ("HELP_LOCAL", "HELP_CLOUD", "HELP_DEVELOPMENT")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")


def groups() -> dict[str, list[str]]:
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    return {name: value.split() for name, value in re.findall(r"^(HELP_[A-Z]+)\s*:=\s*(.*)$", text, flags=re.M)
            if name != "HELP_MARK"}


def documented_targets() -> set[str]:
    return {t for path in MAKEFILES for t in re.findall(r"^([a-zA-Z][\w-]*):.*## ", path.read_text(), flags=re.M)}


def make(*targets: str) -> str:
    return subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), *targets], capture_output=True,
                          text=True, timeout=30, check=True).stdout


def test_every_documented_target_is_in_exactly_one_group():
    listed = [t for names in groups().values() for t in names]
    assert len(listed) == len(set(listed)), "a target is in two help groups"
    assert set(listed) == documented_targets() - {"help"}


def test_help_lists_the_user_groups_in_order_with_the_variables_and_no_maintainer_target():
    out = make("help")
    heads = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert [h.split(" ")[0].rstrip(":") for h in heads] == ["Local", "Cloud", "Development", "Variables"]
    shown = re.findall(r"^  make (\S+)", out, flags=re.M)
    assert shown == [t for group in USER_GROUPS for t in groups()[group]]
    for variable in ("CONFIG=", "RUN_DIR=", "ARGS=", "RUN=", "GPU="):
        assert f"  {variable}" in out
    assert set(re.findall(r"^  make (\S+)", make("help-all"), flags=re.M)) == documented_targets() - {"help"}


@pytest.mark.parametrize("words, unknown", [
    (["CONFG=x.yaml"], "CONFG (did you mean CONFIG?)"),
    (["RUNDIR=r", "CONFG=x"], "CONFG (did you mean CONFIG?), RUNDIR (did you mean RUN_DIR?)"),
    (["XYZZY=1"], "XYZZY"),
    (["CONFIG=x.yaml", "RUN_DIR=r", "TORCH_INDEX_URL=u"], None)])
def test_a_command_line_variable_no_makefile_reads_stops_make_naming_the_nearest_setting(words, unknown):
    # as typed at a shell: under `make test` the outer make's MAKELEVEL and MAKEFLAGS would reach this make
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "MAKEOVERRIDES")}
    result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "help", *words],
                            capture_output=True, text=True, timeout=30, check=False, env=env)
    if unknown is None:
        assert result.returncode == 0 and result.stderr == "", result.stderr
        return
    assert result.returncode != 0 and "Local" not in result.stdout  # stopped before the target ran
    [line] = result.stderr.splitlines()
    assert line.startswith("Makefile:"), line
    said = line.split(" *** ", 1)[1]
    assert said.startswith(f"{unknown}: no makefile here reads it, so make stopped; fix the spelling (the settings: "
                           "ARGS "), line
    assert " CONFIG " in said and " RUN_DIR " in said and " PY " not in said
