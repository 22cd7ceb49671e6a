"""Plans that must fail before anything is created, with the message the user sees: the real
terraform binary plans a copy of infra/ against the stand-in google provider (issue 16)."""

import re

import pytest
from standin_tools import STANDIN_VARS

pytestmark = pytest.mark.terraform


def refused_plan(terraform, infra, *variables) -> str:
    """Plan with -var pairs that must be refused; return what terraform printed, on one line per diagnostic."""
    args = [arg for name_value in variables for arg in ("-var", name_value)]
    result = terraform(infra, "plan", "-input=false", "-lock=false", "-no-color", *STANDIN_VARS, *args, check=False)
    assert result.returncode == 1, f"the plan was not refused:\n{result.stdout[-3000:]}"
    return re.sub(r"\s*│\s*", " ", result.stderr)


def test_spot_without_max_run_hours_is_refused_naming_the_fix(terraform, standin_infra):
    output = refused_plan(terraform, standin_infra, "spot=true", "max_run_hours=0")
    assert 'on variables.tf' in output and "var.spot" in output
    assert "spot = true needs max_run_hours > 0 (e.g. max_run_hours = 8)" in output
