"""Config: typed defaults, YAML + overrides, and errors that name the field and the fix."""

import re

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from selfplay.__main__ import main
from selfplay.config import SECTIONS
from selfplay.config_io import load, resolve_config
from selfplay.errors import ConfigError


def test_packaged_configs_load_and_overrides_apply():
    cfg = load(resolve_config("connect4"), ["--search.simulations=100", "--learner.lr=0.01", "--run.dir=x"])
    assert cfg.game.name == "connect4" and cfg.search.simulations == 100 and cfg.learner.lr == 0.01
    assert load(resolve_config("tictactoe")).game.name == "tictactoe"


@pytest.mark.parametrize("overrides,message", [
    (["--search.simulation=10"], ("unknown key search.simulation in the --section.key=value flags: "
                                 "did you mean 'simulations'? valid keys are simulations")),
    (["--serch.simulations=10"], ("unknown config section 'serch' in the --section.key=value flags: "
                                 "did you mean 'search'?")),
    (["--search.simulations=lots"], "search.simulations='lots' must be an integer"),
    (["--search.simulations=0"], "search.simulations=0 must be in 1..100000"),
    (["--learner.value_target=v"], "learner.value_target='v' is not allowed: choose one of z, q, zq"),
    (["--actors.inference=gpu"], "actors.inference='gpu' is not allowed: choose one of auto, local, learner"),
    (["--game.name=chess"], "game.name='chess' is unknown: choose one of connect4, tictactoe"),
    (["--learner.min_replay=10"], "learner.min_replay=10 must be between learner.batch_size"),
    (["search.simulations"], "bad override"),
    (["--eval.arena_baselines=random,alphabeta3"], ("eval.arena_baselines='random,alphabeta3' must list some of "
                                                    "random, greedy, minimax<depth>")),
    (["--eval.arena_games=1"], "eval.arena_games=1 must be in 2..10000"),
])
def test_bad_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(resolve_config("connect4"), overrides)


def test_malformed_yaml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("game:\n  name: [connect4\n")
    with pytest.raises(ConfigError, match="not valid YAML at line"):
        load(bad)
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "missing.yaml")
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load(listy)


def test_a_tab_in_the_yaml_is_named_with_its_line_and_column(tmp_path):
    tabbed = tmp_path / "tabbed.yaml"
    tabbed.write_text("game:\n\tname: connect4\n")
    with pytest.raises(ConfigError, match=r"has a tab at line 2, column 1: YAML indents with spaces only"):
        load(tabbed)


def test_cli_prints_one_line_and_exits_2_on_a_bad_config(capsys):
    assert main(["train", "--config", "connect4", "--search.c_puct=-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["selfplay: error: search.c_puct=-1.0 must be in (0, 1000]"]
    assert main(["train", "--config", "go"]) == 2
    assert "choose one of connect4, tictactoe" in capsys.readouterr().err


def test_a_retired_key_names_its_replacement_but_an_old_checkpoints_config_still_loads():
    with pytest.raises(ConfigError, match=r"learner\.max_reuse is no longer a setting: use learner\.samples_per_position"):
        load(resolve_config("connect4"), ["--learner.max_reuse=4"])
    from selfplay.config_io import from_dict
    assert from_dict({"learner": {"max_reuse": 4, "lr": 0.01}}).learner.lr == 0.01  # `selfplay eval` of an old run
    with pytest.raises(ConfigError, match=r"search\.random_opening_final_share is no longer a setting: use "
                                          r"search\.random_opening_fraction, constant"):
        load(resolve_config("connect4"), ["--search.random_opening_final_share=0.3333"])
    assert from_dict({"search": {"random_opening_final_share": 1.0}}).search.random_opening_fraction == 0.0


@pytest.mark.parametrize("overrides,message", [
    (["--learner.samples_per_position=0"], "learner.samples_per_position=0.0 must be in (0, 1000]"),
    (["--learner.window_floor=100"], "learner.window_floor=100 must be between learner.batch_size"),
    (["--learner.window_exponent=1.5"], "learner.window_exponent=1.5 must be in (0, 1]"),
    (["--learner.lr_schedule=step"], "learner.lr_schedule='step' is not allowed: choose one of constant, cosine"),
    (["--learner.lr_final_fraction=0"], "learner.lr_final_fraction=0.0 must be in (0, 1]"),
    (["--model.value_filters=0"], "model.value_filters=0 must be in 1..1024"),
    (["--search.full_search_fraction=0"], "search.full_search_fraction=0.0 must be in (0, 1] (1 = every move in full)"),
    (["--search.fast_simulations=0"], "search.fast_simulations=0 must be in 1..100000"),
    (["--learner.ema_half_life_steps=-1"], "learner.ema_half_life_steps=-1 must be in 0..1000000 (0 = no average)"),
])
def test_new_learner_and_model_fields_are_validated(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
                       .replace("[", r"\[").replace("]", r"\]")):
        load(resolve_config("connect4"), overrides)


def test_a_config_of_the_wrong_shape_is_named_before_anything_is_merged(tmp_path):
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("model: 5\nsearch:\n  simulations: 10\n")
    with pytest.raises(ConfigError, match=r"config section 'model' in config file .* is 5: it must be a mapping"):
        load(scalar)
    typo = tmp_path / "typo.yaml"
    typo.write_text("serach:\n  simulations: 10\n")
    with pytest.raises(ConfigError, match="unknown config section 'serach' in config file .*did you mean 'search'"):
        load(typo)
    with pytest.raises(ConfigError, match="is a folder: pass --config a YAML file in it"):
        load(tmp_path)


def test_train_help_lists_every_section_and_key(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "packages/selfplay/config.py" in out
    for name in SECTIONS:
        assert f"  {name}: " in out


# Anything YAML can hold, nested a little: the shapes users get wrong (scalars for sections, lists, typos).
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8)
names = st.sampled_from([*SECTIONS, "serch", "modle", "x"]) | st.text(max_size=6)
keys = st.sampled_from(["simulations", "channels", "lr", "dir", "name", "count", "max_reuse", "simulation"]) \
    | st.text(max_size=6)
documents = scalars | st.lists(scalars, max_size=3) | st.dictionaries(
    names, scalars | st.lists(scalars, max_size=2) | st.dictionaries(keys, scalars | st.lists(scalars, max_size=2),
                                                                     max_size=3), max_size=4)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents)
@example(document={"search": {"simul\nations": 10}})  # found by CI in the dev container: a two-line error
def test_any_malformed_config_is_one_config_error_never_a_crash(tmp_path, document):
    path = tmp_path / "generated.yaml"
    path.write_text(yaml.safe_dump(document))
    before = path.read_text()
    try:
        load(path)
    except ConfigError as e:
        assert "\n" not in str(e) and str(e)  # one line that says what is wrong
    assert path.read_text() == before  # nothing is written


@settings(max_examples=200, deadline=None)
@given(flags=st.lists(st.text(alphabet="-.=abcdeilmnorstu0123456789", max_size=24), max_size=3))
def test_any_malformed_override_is_one_config_error_never_a_crash(flags):
    try:
        load(resolve_config("tictactoe"), flags)
    except ConfigError as e:
        assert "\n" not in str(e) and str(e)


def test_the_budget_sets_how_far_the_run_is():
    run = load(resolve_config("connect4"), ["--run.max_minutes=120", "--run.max_steps=1000"]).run
    assert run.time_progress(30 * 60) == 0.25
    assert run.budget_progress(step=500, time_progress=0.25) == 0.5          # the steps run out first here
    assert run.budget_progress(step=100, time_progress=run.time_progress(3 * 3600)) == 1.0
    assert load(None, []).run.budget_progress(step=10**6, time_progress=0.0) is None  # no budget: no schedule


@pytest.mark.parametrize("flags, step, elapsed_s, spent_by", [
    ([], 10**6, 10**6, ""),                                                     # no budget: never spent
    (["--run.max_steps=1000"], 999, 10**6, ""),
    (["--run.max_steps=1000"], 1000, 0, "max_steps"),
    (["--run.max_minutes=30"], 10**6, 1799, ""),
    (["--run.max_minutes=30"], 0, 1800, "max_minutes"),
    (["--run.max_minutes=30", "--run.max_steps=1000"], 1000, 1800, "max_steps"),  # both: the steps are named
])
def test_the_budget_says_whether_it_is_spent_and_by_what(flags, step, elapsed_s, spent_by):
    assert load(None, flags).run.spent_by(step, elapsed_s) == spent_by


def test_each_rank_seeds_from_the_run_seed_apart_from_every_other_rank():
    run = load(None, ["--run.seed=7"]).run
    assert run.rank_seed(0) == 7 and len({run.rank_seed(r) for r in range(64)}) == 64


def test_a_node_session_plans_its_end_before_the_launchs_deadline_and_keeps_a_sooner_budget_of_its_own():
    from launch_contract import DEADLINE_ENV
    from selfplay.cli.train import DEADLINE_MARGIN_S, within_deadline

    cfg = load(resolve_config("tictactoe"))
    assert cfg.run.max_minutes == 0 and within_deadline(cfg, {}) is cfg  # the laptop: no deadline, no change
    deadline = {DEADLINE_ENV: "10000"}  # the agent stops the program then (epoch seconds)
    planned = within_deadline(cfg, deadline, now=10000 - 3600)
    assert planned.run.max_minutes == round((3600 - DEADLINE_MARGIN_S) / 60, 2)  # a minute before it
    assert within_deadline(cfg, deadline, now=10000 - 40).run.max_minutes == 0.33  # half of what is left
    assert within_deadline(cfg, deadline, now=10000 + 5).run.max_minutes == 0.01  # past it: end at once, not never
    sooner = load(resolve_config("tictactoe"), ["--run.max_minutes=30"])
    assert within_deadline(sooner, deadline, now=10000 - 3600) is sooner


@pytest.mark.parametrize("text, said", [
    ("search:\n  simulations: 64\n  c_puct: 1.5\n  simulations: 200\n",
     "sets search.simulations twice (lines 2 and 4): keep the one you mean"),
    ("search:\n  simulations: 64\nmodel:\n  channels: 32\nsearch:\n  c_puct: 1.5\n",
     "has section search twice (lines 1 and 5): merge them into one"),
])
def test_a_config_that_names_a_key_or_section_twice_is_refused_naming_both_lines(tmp_path, capsys, text, said):
    twice = tmp_path / "twice.yaml"  # YAML keeps the second silently: the first section's keys were dropped
    twice.write_text(text)
    assert main(["check", "--config", str(twice)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"selfplay: error: config file {str(twice)!r} {said}"]


def test_an_integer_written_as_a_whole_float_is_taken_and_a_fraction_is_refused_naming_the_range(capsys):
    assert main(["check", "--config", "connect4", "--search.simulations=1e4"]) == 0
    assert load(resolve_config("connect4"), ["--search.simulations=1e4"]).search.simulations == 10_000
    assert main(["check", "--config", "connect4", "--search.simulations=2.5e1"]) == 0
    capsys.readouterr()
    assert main(["check", "--config", "connect4", "--search.simulations=1.5"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "selfplay: error: search.simulations='1.5' must be an integer in 1..100000"]
    assert main(["check", "--config", "connect4", "--search.simulations=1e6"]) == 2  # whole, out of range
    assert capsys.readouterr().err.splitlines() == [
        "selfplay: error: search.simulations=1000000 must be in 1..100000"]


def test_the_run_folder_is_the_configs_or_the_flags_whatever_the_node_gives(monkeypatch):
    """On a node the agent gives every program the run's bucket folder; the trainer writes its own local run.dir
    (the kit's gantry.yaml: --run.dir=trainer, a --sync folder), never the bucket itself."""
    import argparse

    from launch_contract import RUN_DIR_ENV
    from selfplay.cli.options import load_config

    monkeypatch.setenv(RUN_DIR_ENV, "gs://b/runs/r1")
    args = argparse.Namespace(config="tictactoe")
    assert load_config(args, []).run.dir == "runs/tictactoe"
    assert load_config(args, ["--run.dir=trainer"]).run.dir == "trainer"


