"""`make help` is the map of the targets: grouped Local / Cloud / Development in the user's order, with the
variables, and every documented target in exactly one group (the maintainers' only in `make help-all`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from checkout import REPO as ROOT

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
    listed = re.findall(r"^  ([A-Z][A-Z0-9_]*) ", out.split("Variables", 1)[1], flags=re.M)
    assert {"CONFIG", "RUN_DIR", "ARGS", "RUN", "GPU", "PROJECT", "TORCH_SPEC", "TRAIN_CONFIG", "TEST_WORKERS",
            "BASE_IMAGE"} <= set(listed)
    assert "  CONFIG         the trainer config of train-local (now packages/selfplay/configs/connect4.yaml)" in out
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


def test_every_setting_the_docs_set_is_in_make_help():
    """A `NAME=value` the README or docs/ show for a setting a makefile declares (?=) is one make help explains."""
    settings = {name for path in MAKEFILES for name in re.findall(r"^([A-Z][A-Z0-9_]*) *\?=", path.read_text(), flags=re.M)}
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    used = {name for name in settings if re.search(rf"(?<![A-Z_]){name}=", docs)}
    listed = set(re.findall(r"^  ([A-Z][A-Z0-9_]*) ", make("help").split("Variables", 1)[1], flags=re.M))
    assert used, "the docs set no make variable"
    assert used <= listed, f"make help does not explain {sorted(used - listed)}; add a `#: ` line above each"
