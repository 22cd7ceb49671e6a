"""Every command a user is shown runs in a test, through its command line (issue #42).

Shown: `make help`'s targets, every `gantry` and `selfplay` verb, and the commands of README.md and docs/*.md, read
from where they are shown (tests/unit/shown_commands.py), so a new doc line brings its own check. Each matches a
rule of shown_commands.RULES: run here with the smallest real input (the tests below), or proven by a named test
that already runs it (the node twin runs the README's cloud blocks; the launcher tests run each verb against the
Google stand-ins; tests/docker runs the images). A command no rule matches, a rule no command matches and a named
test that does not exist fail here. On top of that, every shown make command goes through `make -n` (its target
and variables exist) and the verb its recipe runs parses its flags (the trainer's through `selfplay check`).
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import shown_commands as table
from shown_commands import Here, Proven, Shown, all_shown, rule_of
from suite_make import MAKE, ROOT, clean_environ

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")

SHOWN = all_shown() if shutil.which("make") else []
PLACEHOLDER = re.compile(r"\[|\.\.\.|…|\bVERB\b")  # a template in prose (`ARGS="[--image IMAGE] ..."`), not a line
# The smallest real run of each local target: appended to the shown ARGS (the last value of a flag wins).
SMALL_ARGS = {
    "train-local": "--run.max_steps=1 --eval.every_minutes=0 --actors.count=1 --actors.games=8 "
                   "--learner.min_replay=16 --learner.batch_size=16 --search.simulations=4 --search.fast_simulations=2",
    "eval": "--positions 2 --simulations 2",
    "arena": "--games 2 --baselines random --simulations 2 --previous 0",
    "plot": "",
    "tensorboard": "--host 127.0.0.1 --port 0",
}


def shown_for(check: Here | Proven) -> list[Shown]:
    return [s for s in SHOWN if (rule := rule_of(s)) is not None and rule[1] == check]


def ids(commands: list[Shown]) -> list[str]:
    return [f"{s.source}: {s.command}" for s in commands]


def make(*words: str, timeout: int = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*MAKE, *words], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**clean_environ(), **(env or {})})


def make_words(shown: Shown) -> tuple[dict[str, str], list[str]]:
    """(environment assignments before `make`, the words after it) of a shown make command."""
    words = shown.words
    at = words.index("make")
    return dict(w.split("=", 1) for w in words[:at]), words[at + 1:]


# ---- the table ------------------------------------------------------------------------------------------------------

def test_the_layer_reads_commands_from_every_source():
    sources = {s.source for s in SHOWN}
    assert {"make help", "verbs", "README.md"} <= sources and any(s.startswith("docs/") for s in sources)


def test_a_doc_brings_its_block_lines_and_the_commands_of_its_prose(tmp_path):
    doc = tmp_path / "NEW.md"
    doc.write_text('Run `make frobnicate ARGS="-y"` or `gantry run --detach`; `gantry run: error: x` is a message.\n'
                   "```bash\nmake train-local \\\n    ARGS=--run.max_steps=5   # continued\n# a comment\n"
                   "gcloud auth login\n```\n```\nlaptop: gantry (a diagram)\n```\n")
    assert [s.command for s in table.doc_commands(doc)] == [
        "make train-local ARGS=--run.max_steps=5", "gcloud auth login", "make frobnicate ARGS=-y",
        "gantry run --detach"]
    assert rule_of(Shown("NEW.md", "make frobnicate ARGS=-y")) is None  # so the layer fails until a test runs it


def test_every_shown_command_has_a_test_that_runs_it():
    unmatched = [f"{s.source}: {s.command}" for s in SHOWN if rule_of(s) is None]
    assert not unmatched, ("commands shown to users that no test runs; add a rule to tests/unit/shown_commands.py "
                           "RULES (run it here, or name the test that runs it):\n  " + "\n  ".join(unmatched))


def test_every_rule_matches_a_shown_command():
    unused = [pattern for pattern, _ in table.RULES if not any(re.search(pattern, s.command) for s in SHOWN)]
    assert not unused, f"rules that match no shown command (the doc line went): {unused}"


NAMED = sorted({check for check in [*(c for _, c in table.RULES), *table.VERB_RUNS.values()] if isinstance(check, Proven)},
               key=lambda c: c.node)


@pytest.mark.parametrize("check", NAMED, ids=[c.node for c in NAMED])
def test_every_named_test_exists(check):
    assert check.exists(), f"shown_commands.RULES names {check.node}, which does not exist"


def test_every_verb_has_a_real_run():
    verbs = {s.command for s in SHOWN if s.source == "verbs"}
    assert verbs <= set(table.VERB_RUNS), f"verbs without a real run in shown_commands.VERB_RUNS: {verbs - set(table.VERB_RUNS)}"
    gone = {verb for verb in set(table.VERB_RUNS) - verbs if not getattr(table.VERB_RUNS[verb], "pending", "")}
    assert not gone, f"shown_commands.VERB_RUNS names verbs that do not exist: {gone}"


def test_every_here_check_is_a_test_of_this_file():
    here = {check.test for check in [*(c for _, c in table.RULES), *table.VERB_RUNS.values()] if isinstance(check, Here)}
    assert here <= set(globals()), sorted(here - set(globals()))


# ---- make: every shown make command is one make takes, and its verb takes its flags ----------------------------------

def _recursive_targets() -> set[str]:
    """Targets whose recipe, or a prerequisite's, runs $(MAKE): `make -n` runs those lines for real."""
    prerequisites, recursive = {}, set()
    for path in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        target = None
        for line in path.read_text().splitlines():
            if (rule := re.match(r"^([a-z][a-z0-9-]*):(?!=)\s*([^#]*)", line)) is not None:
                target = rule.group(1)
                prerequisites[target] = rule.group(2).split()
            elif line.startswith("\t") and target and "$(MAKE)" in line:
                recursive.add(target)
    grew = True
    while grew:
        grew = False
        for target, needs in prerequisites.items():
            if target not in recursive and recursive & set(needs):
                recursive.add(target)
                grew = True
    return recursive


DRY_RUN = [s for s in SHOWN if s.program == "make" and not PLACEHOLDER.search(s.command)]


def _verb_takes(recipe: str) -> str | None:
    """None when the `-m gantry|selfplay VERB ...` line of a recipe parses, else what was refused."""
    words = shlex.split(recipe)
    module = words.index("-m") + 1
    program, argv = words[module], words[module + 1:]
    if program == "gantry":
        from gantry.cli import build_parser
    elif program == "selfplay":
        from selfplay.__main__ import build_parser
    else:
        return None
    if program == "selfplay" and argv[0] in ("train", "launch"):  # the trainer's own check of the same flags
        checked = subprocess.run([sys.executable, "-m", "selfplay", "check", *argv[1:]], capture_output=True,
                                 text=True, timeout=120, check=False, cwd=ROOT)
        return None if checked.returncode == 0 else checked.stdout + checked.stderr
    try:
        args, unknown = build_parser().parse_known_args(argv)
    except SystemExit:
        return f"{program} refuses {argv}"
    takes_overrides = getattr(args, "_verb_name", None) in ("check",)
    return None if not unknown or takes_overrides else f"{program} {argv[0]} does not know {unknown}"


@pytest.mark.parametrize("shown", DRY_RUN, ids=ids(DRY_RUN))
def test_make_accepts_every_shown_make_command(shown):
    env, words = make_words(shown)
    target = next((w for w in words if "=" not in w and not w.startswith("-")), "help")
    if target in _recursive_targets():
        check = rule_of(shown)[1]
        pytest.skip(f"make -n would run make {target}'s sub-make for real; {getattr(check, 'node', check)} runs it")
    dry = make("-n", *words, env=env, timeout=60)
    assert dry.returncode == 0, f"{shown.command}\n{dry.stderr}"  # the target exists, every variable is read
    recipes = dry.stdout.replace("\\\n", " ").splitlines()
    if guard := next((r for r in recipes if r.startswith('test -n "" ||')), None):  # make fetch without RUN=
        refused = subprocess.run(["bash", "-c", guard], capture_output=True, text=True, timeout=30, check=False)
        assert refused.returncode == 2 and refused.stderr.startswith("gantry: error: "), refused.stderr
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        return
    for recipe in recipes:
        if re.search(r"-m (gantry|selfplay) ", recipe):
            refused = _verb_takes(recipe)
            assert refused is None, f"{shown.command} runs `{recipe}`, refused: {refused}"


def test_make_help_and_help_all():
    for target in ("help", "help-all"):
        shown = make(target, timeout=60)
        assert shown.returncode == 0 and shown.stderr == "", shown.stderr
        assert shown.stdout.splitlines()[0] == "Local (this machine):"
    assert "Maintainers:" in shown.stdout


def test_make_test_fast_and_test_and_lint_run_on_one_file(tmp_path):
    """The suite's own targets on one small test file (make test lints everything first)."""
    lint = make("lint", timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "All checks passed!" in lint.stdout
    for target in ("test-fast", "test"):
        report = tmp_path / f"{target}.xml"  # not the outer run's .cache/test-report.xml
        ran = make(target, "TEST_WORKERS=0", f"ARGS=tests/unit/test_layering.py -q -p no:cacheprovider "
                   f"--junitxml={report}", timeout=600)
        assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr
        assert re.search(r"^\d+ passed", ran.stdout.splitlines()[-1]), ran.stdout[-500:]


def test_make_clean_removes_the_caches_and_keeps_the_rest(tmp_path):
    """In a copy of the makefiles: clean in the checkout would pull caches from under the suite that runs it."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copytree(ROOT / "mk", tmp_path / "mk")
    for cache in ("packages/a/__pycache__", ".pytest_cache", ".ruff_cache"):
        (tmp_path / cache).mkdir(parents=True)
    (tmp_path / "packages/a/keep.py").write_text("")
    (tmp_path / "runs/local").mkdir(parents=True)
    cleaned = subprocess.run(["make", "--no-print-directory", "-C", str(tmp_path), "clean"], capture_output=True,
                             text=True, timeout=60, check=False, env=clean_environ())
    assert cleaned.returncode == 0, cleaned.stderr
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if "mk" not in p.parts) == [
        "Makefile", "packages", "packages/a", "packages/a/keep.py", "runs", "runs/local"]


# ---- the verbs ------------------------------------------------------------------------------------------------------

def _verbs() -> list[tuple[str, str]]:
    """(program, verb or "") of every command that test_every_verb_answers_help_... checks."""
    from gantry.cli import VERBS as GANTRY_VERBS
    from selfplay.cli import VERBS as SELFPLAY_VERBS

    every = {"gantry": [v.NAME for v in GANTRY_VERBS], "selfplay": [v.NAME for v in SELFPLAY_VERBS]}
    found = []
    for shown in shown_for(table.VERB_HELP):
        words = [w for w in shown.words if w not in ("python", "-m", "--help", "--config")]
        program = "gantry" if words[0].endswith("gantry") else "selfplay"
        verbs = words[1].split("/") if len(words) > 1 else [""]
        found += [(program, verb) for verb in (every[program] if verbs == ["VERB"] else verbs)]
    return sorted(set(found))


@pytest.mark.parametrize("program, verb", _verbs(), ids=[" ".join(v) for v in _verbs()])
def test_every_verb_answers_help_through_its_command_line(program, verb):
    argv = [sys.executable, "-m", program, *([verb] if verb else []), "--help"]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    assert shown.stdout.startswith(f"usage: {program} {verb}".rstrip()), shown.stdout[:200]


EVAL_SHOWN = [s for s in SHOWN if re.match(r"^(python -m )?selfplay eval --", s.command)]


@pytest.mark.parametrize("shown", EVAL_SHOWN, ids=ids(EVAL_SHOWN))
def test_every_flag_of_a_shown_selfplay_eval_is_one_eval_takes(shown):
    """The benchmark records grade and audit runs with `selfplay eval` flags (bench/RESULTS.md): a reader who retypes
    one finds each flag in today's eval."""
    from selfplay.__main__ import build_parser

    parser = build_parser()
    (eval_parser,) = [action.choices["eval"] for action in parser._subparsers._group_actions]
    takes = {option for action in eval_parser._actions for option in action.option_strings}
    flags = [word.split("=")[0] for word in shown.words if word.startswith("--")]
    assert flags and set(flags) <= takes, f"{shown.source}: {shown.command}: eval takes no {set(flags) - takes}"


def test_selfplay_check_accepts_the_default_config():
    checked = subprocess.run([sys.executable, "-m", "selfplay", "check", "--config", "connect4"], capture_output=True,
                             text=True, timeout=60, check=False, cwd=ROOT)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[-1].startswith("config ok"), checked.stdout


# ---- the local journey: make train-local, eval, arena, plot, tensorboard as shown, on a tiny run ---------------------

def _local_command(shown: Shown, runs: Path) -> tuple[str, list[str]]:
    """The shown make command with its run folder under `runs` and the smallest input appended to its ARGS."""
    _, words = make_words(shown)
    target, settings = words[0], dict(w.split("=", 1) for w in words[1:])
    shown_dir = settings.get("RUN_DIR", "runs/local")
    shown_dir = "runs/local" if shown_dir == "RUN" else shown_dir  # a placeholder for your run: the journey's
    settings["RUN_DIR"] = str(runs / Path(shown_dir).name)
    settings["ARGS"] = f"{settings.get('ARGS', '')} {SMALL_ARGS[target]}".strip()
    return target, [target, *(f"{k}={v}" for k, v in settings.items())]


def _tensorboard(words: list[str]) -> None:
    """make tensorboard serves its page at the address it prints (a free port: ARGS=--port 0), until stopped."""
    server = subprocess.Popen([*MAKE, *words], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=clean_environ(), start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()  # read beside the wait, so that a silent server cannot hang the test
    threading.Thread(target=lambda: [lines.put(line) for line in server.stdout], daemon=True).start()
    try:
        deadline, said = time.monotonic() + 60, ""
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            said += line
            if (url := re.search(r"^TensorBoard \S+ at (http://\S+) ", line)) is not None:
                with urllib.request.urlopen(url.group(1), timeout=30) as page:
                    assert page.status == 200
                return
        raise AssertionError(f"make tensorboard never said where it serves:\n{said}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_the_local_journey_runs_through_make(tmp_path):
    order = list(SMALL_ARGS)  # train first: the others read its run
    journey = sorted(shown_for(table.LOCAL), key=lambda s: order.index(make_words(s)[1][0]))
    assert [make_words(s)[1][0] for s in journey][:1] == ["train-local"]
    commands = {}  # the same command shown in several places runs once
    for shown in journey:
        commands.setdefault(tuple(_local_command(shown, tmp_path)[1]), shown)
    for words, shown in commands.items():
        target = words[0]
        if target == "tensorboard":
            _tensorboard(list(words))
            continue
        ran = make(*words)
        assert ran.returncode == 0, f"{shown.command}\n{ran.stdout[-2000:]}{ran.stderr}"
        lines = ran.stdout.splitlines()
        expected = {"train-local": r"^checkpoint \S+ckpt-\d+\.pt \(final\)$", "eval": r"^Begin-Easy ",
                    "arena": r"^arena record written to ", "plot": r"^wrote \S+progress\.svg$"}[target]
        assert any(re.search(expected, line) for line in lines), f"{shown.command}\n{ran.stdout[-2000:]}"


def test_test_areas_sums_a_junit_report_by_area(tmp_path):
    """`python3 scripts/test_areas.py` (what .ci/run prints after the suite), on a report of three tests."""
    report = tmp_path / "report.xml"
    report.write_text('<testsuites><testsuite>'
                      '<testcase classname="tests.unit.test_a" name="t1" time="30"/>'
                      '<testcase classname="tests.unit.test_b" name="t2" time="30"/>'
                      '<testcase classname="tests.launcher.test_node_twin" name="t3" time="300">'
                      '<properties><property name="twin_s" value="300"/></properties></testcase>'
                      '</testsuite></testsuites>')
    shown = subprocess.run(["python3", "scripts/test_areas.py", str(report)], cwd=ROOT, capture_output=True, text=True,
                           timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["  twin             5.0 min     1 tests", "  unit             1.0 min     2 tests",
                                         "  recorded: twin_s=300"]


# ---- proven means ran: the verdict at the end of the whole suite (tests/shown_proof.py) ------------------------------

def test_the_costly_list_is_short_and_names_why_and_what_runs_it():
    costly = {check for check in [*(c for _, c in table.RULES), *table.VERB_RUNS.values()]
              if isinstance(check, table.Costly)}
    assert 0 < len(costly) <= 4, costly
    for check in costly:
        assert check.reason and re.search(r"make |scripts/|by hand", check.script), check


def test_the_verdict_fails_a_proof_that_was_skipped_or_not_collected_and_accepts_a_missing_engine():
    """...or that passed without running a command line (shown_proof.CommandLineWatch on the process that ran it)."""
    import shown_proof

    proofs = {"tests/a.py::test_ran": "make a (README.md)", "tests/a.py::test_skipped": "make b (README.md)",
              "tests/a.py::test_no_engine": "make c (docs/DOCKER.md)", "tests/a.py::test_gone": "make d (README.md)",
              "tests/a.py::test_param": "make e (README.md)", "tests/a.py::test_one_passed": "make f (README.md)",
              "tests/a.py::test_no_cli": "make g (README.md)", "tests/a.py::test_google": "gcloud auth login (README.md)"}
    verdict = shown_proof.ShownProof(config=None)
    verdict._proofs = proofs
    verdict.collected = {"tests/a.py::test_ran", "tests/a.py::test_skipped", "tests/a.py::test_no_engine",
                         "tests/a.py::test_param[1]", "tests/a.py::test_param[2]", "tests/a.py::test_one_passed[1]",
                         "tests/a.py::test_one_passed[2]", "tests/a.py::test_no_cli", "tests/a.py::test_google"}
    verdict.outcomes = {"tests/a.py::test_ran": ("passed", ""), "tests/a.py::test_skipped": ("skipped", "slow"),
                        "tests/a.py::test_no_engine": ("skipped", "no Docker engine answers `docker info`"),
                        "tests/a.py::test_param[1]": ("skipped", "no Docker engine answers `docker info`"),
                        "tests/a.py::test_one_passed[1]": ("passed", ""),
                        "tests/a.py::test_one_passed[2]": ("skipped", "another test runs this case"),
                        "tests/a.py::test_no_cli": ("passed", ""), "tests/a.py::test_google": ("passed", "")}
    # the watch on the process that ran them: test_no_cli called functions only; gcloud has no stand-in to run
    verdict.command_line = {"tests/a.py::test_ran": True, "tests/a.py::test_no_cli": False,
                            "tests/a.py::test_google": False}
    assert verdict.problems() == [
        "tests/a.py::test_gone was not collected; it proves make d (README.md)",
        ("tests/a.py::test_no_cli passed without running a command line (no process, no arguments parsed); it proves "
         "make g (README.md): run the command, as the user would"),
        "tests/a.py::test_param[2] did not run; it proves make e (README.md)",
        ("tests/a.py::test_skipped was skipped (slow); it proves make b (README.md). Make it run here, or give the "
        "command a Costly rule in shown_commands.RULES (why, and the script that runs it)")]


def test_every_proof_is_a_test_of_the_suite():
    """What the verdict will look for: each proof a test id of an existing file (the Here checks: this file's)."""
    for node in table.proofs():
        path, _, name = node.partition("::")
        assert (ROOT / path).is_file() and name.startswith("test_"), node


def test_the_watch_sees_a_process_and_an_in_process_command_line_and_nothing_else():
    import argparse

    from shown_proof import CommandLineWatch

    with CommandLineWatch() as quiet:
        sum(range(10))
    with CommandLineWatch() as process:
        subprocess.run(["true"], check=True)
    with CommandLineWatch() as parsed:
        argparse.ArgumentParser().parse_args([])
    assert (quiet.ran, process.ran, parsed.ran) == (False, True, True)
    assert subprocess.Popen.__init__.__name__ == "__init__"  # put back
