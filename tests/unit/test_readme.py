"""README.md is a landing page: small, and every command, sample line and figure in it is one the code
and the committed results back. Fast: reads files and calls pure functions, runs nothing."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from checkout import REPO as ROOT

README = ROOT / "README.md"
MAX_README_BYTES = 15 * 1024
WALKTHROUGH_MARKER = "<!-- walkthrough: the node twin runs this block -->"
BENCH_RESULT = ROOT / "bench/results/bench-20261205-202239.json"  # the README's "after N minutes" table


def readme() -> str:
    return README.read_text()


def shipped_config():
    """make train-local's config as the trainer loads it (connect4.yaml over the defaults)."""
    from selfplay.config_io import load, resolve_config

    return load(resolve_config("connect4"))


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S)


def commands(text: str) -> str:
    """What the README asks a reader to type: its code blocks and inline code, not its prose."""
    return "\n".join(code_blocks(text) + re.findall(r"`([^`\n]+)`", text))


def make_targets() -> set[str]:
    targets = set()
    for path in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        targets |= set(re.findall(r"^([a-zA-Z][a-zA-Z0-9_-]*):(?!=)", path.read_text(), flags=re.M))
    return targets


def test_readme_is_at_most_15_kb():
    size = README.stat().st_size
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; move detail into docs/ or bench/RESULTS.md"


def test_every_make_target_the_readme_names_exists():
    named = set(re.findall(r"\bmake ([a-z][a-z0-9-]*)", commands(readme())))
    assert named, "the README names no make target"
    missing = sorted(named - make_targets())
    assert not missing, f"README.md names make targets that do not exist: {missing}"


def test_every_gantry_and_selfplay_verb_the_readme_names_exists():
    from gantry.cli import VERBS
    from selfplay.cli import VERBS as SELFPLAY_VERBS

    text = commands(readme())
    gantry_verbs = {v.NAME for v in VERBS}
    named = set(re.findall(r"^\s*(?:\.venv/bin/)?gantry ([a-z][a-z-]*)", text, flags=re.M))
    assert not named - gantry_verbs, f"README.md names gantry verbs that do not exist: {sorted(named - gantry_verbs)}"
    selfplay_verbs = {v.NAME for v in SELFPLAY_VERBS}
    for verb in set(re.findall(r"(?:python -m selfplay|\bselfplay) ([a-z]+)\b", text)):
        assert verb in selfplay_verbs, f"README.md names `selfplay {verb}`, which selfplay/cli/ lacks"


def test_readme_sends_nobody_to_a_tool_that_is_not_on_path():
    # tensorboard and selfplay live in .venv; the README reaches them through make
    for block in code_blocks(readme()):
        for line in block.splitlines():
            assert not re.match(r"\s*(tensorboard|python -m selfplay|selfplay|gantry)\b", line), line


def test_readme_links_point_at_files_that_exist():
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme()):
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def _regex_of(line: str) -> re.Pattern:
    """The shape of a line: its words and separators literal, every number a wildcard number."""
    number = r"\d+(?:\.\d+)?[kM]?"
    parts = re.split(number, line)
    return re.compile(number.join(re.escape(p) for p in parts))


def test_readme_progress_line_is_one_the_trainer_prints():
    from selfplay.record_keys import EVAL_MINUTE, EVAL_STEP, eval_key
    from selfplay.stats import progress_line

    samples = [line for block in code_blocks(readme()) for line in block.splitlines() if line.startswith("step ")]
    assert samples, "README.md shows no progress line"
    metrics = {"charts/step": 1372, "selfplay/games": 10400, "selfplay/game_length": 26.0,
               "selfplay/draw_rate": 0.12, "charts/positions_per_s": 121.0, "charts/simulations_per_s": 17300.0,
               "learner/buffer_size": 59900, "learner/mean_reuse": 6.0, "losses/total": 1.712,
               "losses/policy": 1.473, "losses/value": 0.239, "learner/wait_fraction": 0.0,
               "charts/elapsed_minutes": 10.0, "charts/remaining_minutes": None}
    last_eval = {eval_key("Middle-Medium", "mcts_weak"): 0.089, eval_key("Begin-Hard", "mcts_weak"): 0.173,
                 EVAL_STEP: 1550, EVAL_MINUTE: 9.8}
    printed = [progress_line(metrics, last_eval),  # make train-local: no budget
               progress_line({**metrics, "charts/remaining_minutes": 20.0}, last_eval)]  # --run.max_minutes
    for sample in samples:
        assert any(_regex_of(line).fullmatch(sample) for line in printed), (
            f"README.md's sample progress line\n  {sample}\nis not the shape the trainer prints:\n  "
            + "\n  ".join(printed))


def test_readme_startup_line_shows_the_config_make_train_local_ships():
    """The line a run starts with names the net, games and simulations it trains with: the README's must be the
    shipped config's, so changing a default in connect4.yaml without the landing page fails here."""
    shipped = shipped_config()
    starts = [line for block in code_blocks(readme()) for line in block.splitlines() if line.startswith("training ")]
    assert len(starts) == 1, "README.md shows no line a run starts with"
    expected = (f"training {shipped.game.name}: ", f" x {shipped.actors.games} games, ",
                f" {shipped.search.simulations} sims/move, ",
                f" net {shipped.model.channels}x{shipped.model.blocks}, ", f" run dir {shipped.run.dir}")
    missing = [part.strip(" ,") for part in expected if part not in starts[0]]
    assert not missing, f"README.md's startup line\n  {starts[0]}\nlacks what connect4.yaml ships: {missing}"


def test_readme_says_how_many_positions_the_progress_line_grades_and_the_table_grades():
    """The line a run prints grades eval.positions_per_set positions per set (connect4.yaml's and the default);
    the table is the bench's grading of all 1,000 afterwards: the README must not pass one off as the other."""
    from selfplay.config import EvalConfig

    text = " ".join(readme().split())
    shipped = shipped_config().eval.positions_per_set
    assert shipped == EvalConfig().positions_per_set
    assert f"over the first {shipped} positions of each set (`eval.positions_per_set`" in text
    assert "graded afterwards on all 1,000 positions per set" in text
    curve = json.loads(BENCH_RESULT.read_text())["training"]["runs"][0]["curve"]
    assert {point[test_set]["positions"] for point in curve for test_set in ("Middle-Medium", "Begin-Hard")} == {1000}


def test_readme_minutes_table_is_the_committed_bench_result():
    assert BENCH_RESULT.name in readme()
    training = json.loads(BENCH_RESULT.read_text())["training"]
    # the table is the net make train-local trains: a bench that widened or narrowed it says so in its train_args
    channels = re.search(r"--model\.channels=(\d+)", training["train_args"])
    shipped = shipped_config().model.channels
    assert channels is None or int(channels.group(1)) == shipped, (
        f"README.md's minutes table trained {channels.group(0)}, connect4.yaml ships {shipped}")
    run = training["runs"][0]
    by_step = {c["step"]: c for c in run["curve"]}
    rows = re.findall(r"^\| (\d+) \| (\d+) \| ([\d.]+)% \| ([\d.]+)% \|$", readme(), flags=re.M)
    assert rows, "README.md has no minutes table"
    reference = training["azg_30min_mcts_weak"]
    assert (f"reaches {100 * reference['Middle-Medium']:.1f}% and {100 * reference['Begin-Hard']:.1f}% on those two "
            "sets in 30 minutes") in " ".join(readme().split())
    for minutes, step, mid, hard in rows:
        point = by_step[int(step)]
        assert round(point["minutes"]) == int(minutes)
        assert f"{100 * point['Middle-Medium']['mcts_weak']:.1f}" == mid
        assert f"{100 * point['Begin-Hard']['mcts_weak']:.1f}" == hard


def _walkthrough() -> str:
    text = readme()
    assert text.count(WALKTHROUGH_MARKER) == 1
    after = text.split(WALKTHROUGH_MARKER, 1)[1]
    match = re.match(r"\s*```bash\n(.*?)```", after, flags=re.S)
    assert match, f"the line after {WALKTHROUGH_MARKER!r} must open a ```bash block"
    return match.group(1)


def test_walkthrough_enables_every_api_infra_needs():
    locals_tf = (ROOT / "infra/locals.tf").read_text()
    required = set(re.findall(r'"([a-z]+\.googleapis\.com)"', locals_tf.split("required_apis", 1)[1].split(")")[0]))
    required.discard("tpu.googleapis.com")  # TPU only: docs/TPU.md
    required.add("cloudresourcemanager.googleapis.com")  # preflight reads org policies before Terraform runs
    enabled = set(re.findall(r"[a-z]+\.googleapis\.com", _walkthrough()))
    assert required <= enabled, f"the walkthrough does not enable {sorted(required - enabled)}"


def test_walkthrough_order_builds_before_billing_and_pushes_after_the_registry():
    steps = [line.split("#")[0].strip() for line in _walkthrough().splitlines() if line.strip()]
    steps = [s for s in steps if s]

    def at(prefix: str) -> int:
        return next(i for i, s in enumerate(steps) if s.startswith(prefix))

    for first in ("gcloud auth login", "gcloud config set project", "gcloud auth application-default login",
                  "gcloud auth application-default set-quota-project", "gcloud services enable"):
        assert at(first) < at("make apply")
    assert at("make build-train") < at("make apply") < at("make push-train") < at("make run-gcp")
    assert at("make run-gcp") < at("make destroy")


@pytest.mark.terraform
@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform binary not on PATH (CI installs it)")
@pytest.mark.parametrize("row_names, settings, on_demand, spot", [
    ("c4-highcpu-16", {}, "0.69", "0.42"),
    ("+ 1 T4", {"use_gpu": True}, "0.74", "0.27"),
    ("+ 8 L4", {"use_gpu": True, "accelerator_type": "nvidia-l4", "accelerator_count": 8}, "8.02", "3.21"),
])
def test_readme_cost_rows_are_what_make_cost_prints(row_names, settings, on_demand, spot, tmp_path):
    from gantry import config, cost

    def deployment(**settings):  # infra/'s defaults and these settings, as Terraform reads them (config.load)
        path = tmp_path / "terraform.tfvars.json"
        path.write_text(json.dumps({"project_id": "my-project", **settings}))
        return config.load(path, ROOT / "infra")

    row = next(line for line in readme().splitlines() if line.startswith("| 1 ×") and row_names in line)
    assert f"${on_demand}/h" in row and f"${spot}/h" in row, row
    for is_spot, figure in ((False, on_demand), (True, spot)):
        chosen = deployment(**settings, spot=is_spot, max_run_hours=8)
        assert f"{cost.estimate(chosen).node_hourly:.2f}" == figure
