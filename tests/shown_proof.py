"""Proven means ran: the shown-commands layer's verdict at the end of the whole suite (#97).

tests/unit/shown_commands.py names, for each command a user is shown, the test that runs it (`Proven`). That the
test exists is checked by test_shown_commands.py; that it ran is only known once the suite is over, so this plugin
(loaded by tests/conftest.py) keeps every test's outcome, on the xdist controller too, and at the end of a whole-suite
run (`make test`: no -m, -k or paths) fails the session when a named test was not collected, failed, or was skipped
for a reason the layer does not accept. Accepted: the machine lacks what the test needs (a Docker engine, a GPU,
Terraform); a `Costly` rule names a command CI does not run, each with its reason and the script that does.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parent / "unit"))  # shown_commands, as test_shown_commands imports it

# Skip reasons that say the machine lacks a part, not that the test chose not to run what it proves.
ACCEPTED_SKIP = re.compile(r"no Docker engine|docker-registry is not installed|no usable CUDA|this machine has no GPU"
                           r"|terraform binary|install Terraform|no make on PATH|shellcheck is not installed"
                           r"|cannot be reached from here")


# A proof of these alone need not run a command line of its own: Google's CLI has no stand-in (the test runs what the
# command sets up or names), the user's shell edits a file the test reads as gantry does, and the host's own
# administration (sudo) is the user's.
NOT_RUN_HERE = re.compile(r"^(gcloud |cp |'\$EDITOR' |sudo )")
# A run of part of the suite that still wants the verdict on the proofs it ran: GANTRY_SHOWN_PROOF=1
PART_ENV = "GANTRY_SHOWN_PROOF"


RAN_KEY = pytest.StashKey[bool]()


class CommandLineWatch:
    """While a proof runs: did it run a command line? A process it started (subprocess, the way make, docker,
    terraform and `python -m` run), or arguments parsed in this process (argparse, which gantry's, selfplay's and
    bench's command lines parse with: the in-process `gantry` the launcher tests call)."""

    def __enter__(self):
        self.ran = False
        self.popen, self.parse = subprocess.Popen.__init__, argparse.ArgumentParser.parse_known_args
        watch = self

        def popen(process, *args, **kwargs):
            watch.ran = True
            return watch.popen(process, *args, **kwargs)

        def parse(parser, *args, **kwargs):
            watch.ran = True
            return watch.parse(parser, *args, **kwargs)

        subprocess.Popen.__init__, argparse.ArgumentParser.parse_known_args = popen, parse
        return self

    def __exit__(self, *exc) -> None:
        subprocess.Popen.__init__, argparse.ArgumentParser.parse_known_args = self.popen, self.parse


class ShownProof:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.collected: set[str] = set()
        self.outcomes: dict[str, tuple[str, str]] = {}  # test id -> (passed | failed | skipped, skip reason)
        self.command_line: dict[str, bool] = {}  # a proof's test id -> it ran a command line (CommandLineWatch)
        self._proofs: dict[str, str] | None = None

    def proofs(self) -> dict[str, str]:
        if self._proofs is None:
            from shown_commands import proofs

            self._proofs = proofs()
        return self._proofs

    def whole_suite(self) -> bool:
        option = self.config.option
        return not option.markexpr and not option.keyword and \
            self.config.args_source == pytest.Config.ArgsSource.TESTPATHS

    def part_asked(self) -> bool:
        return os.environ.get(PART_ENV) == "1"

    # ---- on the process that runs a test (an xdist worker, or this one) ----
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        proves = (self.whole_suite() or self.part_asked()) and item.nodeid.partition("[")[0] in self.proofs() \
            and not item.nodeid.startswith("tests/unit/test_shown_commands.py::")  # the layer's own: Here checks
        if not proves:
            yield
            return
        with CommandLineWatch() as watch:
            yield
        item.stash[RAN_KEY] = watch.ran

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if call.when == "call" and RAN_KEY in item.stash:
            outcome.get_result().shown_proof_command_line = item.stash[RAN_KEY]  # goes to the controller with it

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
        if report.when == "call" and getattr(report, "shown_proof_command_line", None) is not None:
            self.command_line[report.nodeid] = report.shown_proof_command_line

    def problems(self, whole: bool = True) -> list[str]:
        found = []
        for node, shown in sorted(self.proofs().items()):
            runs = [test for test in self.collected if test == node or test.startswith(node + "[")]
            if not runs:
                if whole:
                    found.append(f"{node} was not collected; it proves {shown}")
                continue
            passed = [test for test in runs if self.outcomes.get(test, ("",))[0] == "passed"]
            if passed:  # a parametrized proof: the case of the command passed (its others may skip, saying why)
                watched = [self.command_line[test] for test in passed if test in self.command_line]
                if watched and not any(watched) and not all(NOT_RUN_HERE.match(s) for s in shown.split("; ")):
                    found.append(f"{node} passed without running a command line (no process, no arguments "
                                 f"parsed); it proves {shown}: run the command, as the user would")
                continue
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
        if hasattr(self.config, "workerinput") or self.config.option.collectonly:
            return  # a worker reports to the controller
        if not self.whole_suite() and not self.part_asked():
            return  # a part of the suite proves part of the docs
        problems = self.problems(whole=self.whole_suite())
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if not problems:
            reporter.write_line(f"shown_proof: the tests that prove the docs' commands ran them "
                                f"({len(self.command_line)} watched)")
        else:
            reporter.section("shown commands: proven means ran", sep="=", red=True)
            for line in problems:
                reporter.line(f"shown_proof: {line}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ShownProof(config), "shown_proof_verdict")
