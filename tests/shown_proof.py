"""Proven means ran: the shown-commands layer's verdict at the end of the whole suite (#97).

tests/unit/shown_commands.py names, for each command a user is shown, the test that runs it (`Proven`). That the
test exists is checked by test_shown_commands.py; that it ran is only known once the suite is over, so this plugin
(loaded by tests/conftest.py) keeps every test's outcome, on the xdist controller too, and at the end of a whole-suite
run (`make test`: no -m, -k or paths) fails the session when a named test was not collected, failed, or was skipped
for a reason the layer does not accept. Accepted: the machine lacks what the test needs (a Docker engine, a GPU,
Terraform); a `Costly` rule names a command CI does not run, each with its reason and the script that does.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent / "unit"))  # shown_commands, as test_shown_commands imports it

# Skip reasons that say the machine lacks a part, not that the test chose not to run what it proves.
ACCEPTED_SKIP = re.compile(r"no Docker engine|docker-registry is not installed|no usable CUDA|this machine has no GPU"
                           r"|terraform binary|install Terraform|no make on PATH|shellcheck is not installed"
                           r"|cannot be reached from here")


class ShownProof:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.collected: set[str] = set()
        self.outcomes: dict[str, tuple[str, str]] = {}  # test id -> (passed | failed | skipped, skip reason)

    def whole_suite(self) -> bool:
        option = self.config.option
        return not option.markexpr and not option.keyword and \
            self.config.args_source == pytest.Config.ArgsSource.TESTPATHS

    # ---- what was collected: here, or on each xdist worker ----
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items) -> None:
        self.collected.update(item.nodeid for item in items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.collected.update(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = ("failed", "")
        elif report.skipped and report.nodeid not in self.outcomes:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            self.outcomes[report.nodeid] = ("skipped", reason.removeprefix("Skipped: "))
        elif report.passed and report.when == "call" and report.nodeid not in self.outcomes:
            self.outcomes[report.nodeid] = ("passed", "")

    def problems(self) -> list[str]:
        from shown_commands import proofs

        found = []
        for node, shown in sorted(proofs().items()):
            runs = [test for test in self.collected if test == node or test.startswith(node + "[")]
            if not runs:
                found.append(f"{node} was not collected; it proves {shown}")
                continue
            if any(self.outcomes.get(test, ("",))[0] == "passed" for test in runs):
                continue  # a parametrized proof: the case of the command passed (its others may skip, saying why)
            for test in runs:
                outcome, reason = self.outcomes.get(test, ("not run", ""))
                if outcome == "skipped" and not ACCEPTED_SKIP.search(reason):
                    found.append(f"{test} was skipped ({reason}); it proves {shown}. Make it run here, or give the "
                                 "command a Costly rule in shown_commands.RULES (why, and the script that runs it)")
                elif outcome == "not run":
                    found.append(f"{test} did not run; it proves {shown}")
        return found

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if hasattr(self.config, "workerinput") or not self.whole_suite() or self.config.option.collectonly:
            return  # a worker reports to the controller; a part of the suite proves part of the docs
        problems = self.problems()
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if not problems:
            from shown_commands import proofs

            reporter.write_line(f"shown_proof: the {len(proofs())} tests that prove the docs' commands ran")
        else:
            reporter.section("shown commands: proven means ran", sep="=", red=True)
            for line in problems:
                reporter.line(f"shown_proof: {line}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ShownProof(config), "shown_proof_verdict")
