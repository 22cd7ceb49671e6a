"""Config: typed defaults, YAML + overrides, and errors that name the field and the fix."""

import pytest
from selfplay.__main__ import main, resolve_config
from selfplay.config import ConfigError, load


def test_packaged_configs_load_and_overrides_apply():
    cfg = load(resolve_config("connect4"), ["--search.simulations=100", "--learner.lr=0.01", "--run.dir=x"])
    assert cfg.game.name == "connect4" and cfg.search.simulations == 100 and cfg.learner.lr == 0.01
    assert load(resolve_config("tictactoe")).game.name == "tictactoe"


@pytest.mark.parametrize("overrides,message", [
    (["--search.simulation=10"], "unknown key search.simulation: valid keys are simulations"),
    (["--serch.simulations=10"], "unknown config section 'serch'"),
    (["--search.simulations=lots"], "search.simulations='lots' must be an integer"),
    (["--search.simulations=0"], "search.simulations=0 must be in 1..100000"),
    (["--learner.value_target=v"], "learner.value_target='v' is not allowed: choose one of z, q, zq"),
    (["--actors.inference=gpu"], "actors.inference='gpu' is not allowed: choose one of auto, local, learner"),
    (["--game.name=chess"], "game.name='chess' is unknown: choose one of connect4, tictactoe"),
    (["--learner.min_replay=10"], "learner.min_replay=10 must be between learner.batch_size"),
    (["search.simulations"], "bad override"),
])
def test_bad_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
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


def test_cli_prints_one_line_and_exits_2_on_a_bad_config(capsys):
    assert main(["train", "--config", "connect4", "--search.c_puct=-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["selfplay: error: search.c_puct=-1.0 must be > 0"]
    assert main(["train", "--config", "go"]) == 2
    assert "choose one of connect4, tictactoe" in capsys.readouterr().err


def test_a_retired_key_names_its_replacement_but_an_old_checkpoints_config_still_loads():
    with pytest.raises(ConfigError, match=r"learner\.max_reuse is no longer a setting: use learner\.samples_per_position"):
        load(resolve_config("connect4"), ["--learner.max_reuse=4"])
    from selfplay.config import from_dict
    assert from_dict({"learner": {"max_reuse": 4, "lr": 0.01}}).learner.lr == 0.01  # `selfplay eval` of an old run


@pytest.mark.parametrize("overrides,message", [
    (["--learner.samples_per_position=0"], "learner.samples_per_position=0.0 must be in (0, 1000]"),
    (["--learner.window_floor=100"], "learner.window_floor=100 must be between learner.batch_size"),
    (["--learner.window_exponent=1.5"], "learner.window_exponent=1.5 must be in (0, 1]"),
    (["--learner.lr_schedule=step"], "learner.lr_schedule='step' is not allowed: choose one of constant, cosine"),
    (["--learner.lr_final_fraction=0"], "learner.lr_final_fraction=0.0 must be in (0, 1]"),
    (["--model.value_filters=0"], "model.value_filters=0 must be in 1..1024"),
])
def test_new_learner_and_model_fields_are_validated(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
                       .replace("[", r"\[").replace("]", r"\]")):
        load(resolve_config("connect4"), overrides)
