"""gantry.yaml (gantry/launches/program_file.py): what a project declares of its program, each mistake refused in one line
before anything starts; and the kit's own declaration, held to the trainer's record keys."""

from __future__ import annotations

import pytest
from gantry.errors import GantryError
from gantry.launches import program_file, stats_reports
from selfplay.record_keys import LOSS_KEY, POSITIONS_PER_S_KEY, STATS_FILE, arena_key, eval_key


def test_the_kits_gantry_yaml_names_keys_the_trainer_writes():
    kit = program_file.load(program_file.KIT_ROOT)
    assert kit.command[-2] == "launch" and kit.check[:4] == ("python", "-m", "selfplay", "check")
    # its run folder is its one sync folder, which holds its stats: the agent's copy is the trainer's bucket writer
    (folder,) = kit.sync
    assert kit.command[-1] == kit.check[-1] == f"--run.dir={folder}" and kit.stats == f"{folder}/{STATS_FILE}"
    assert {LOSS_KEY, POSITIONS_PER_S_KEY} <= set(kit.figures) and kit.show["pace"]["key"] == POSITIONS_PER_S_KEY
    written = {eval_key("Begin-Hard", "mcts_weak"): 0.2, arena_key("random", "score"): 1.0, "arena/elo": 812.0,
               "step": 600}
    for report in kit.show["reports"]:  # each line status shows finds what the trainer's own key helpers write
        assert stats_reports.newest_report([written], report["keys"]) is not None, report


def test_a_project_without_gantry_yaml_declares_nothing(tmp_path):
    assert program_file.load(tmp_path) is None


@pytest.mark.parametrize("text, problem", [
    ("command: python train.py\ncomand: x\n", "unknown key comand. The keys it takes: command, check, sync,"),
    ("check: python check.py\n", "names no command. Add command:"),
    ("command: python train.py\ncommand: python other.py\n", "is not YAML we can read: "),
    ("command: [python, 3]\n", "command is ['python', 3], not a command"),
    ("command: python train.py\nsync: {a: b}\n", "sync is {'a': 'b'}, not a folder or a list of folders"),
    ("command: python train.py\nfigures: {loss: loss}\n", "figures is {'loss': 'loss'}, not a mapping of key to"),
    ("command: python train.py\npace: {key: x}\n", "pace is {'key': 'x'}, not {key: KEY, unit: WHAT}"),
    ("command: python train.py\nreports: [{title: E, keys: 'a/*/*'}]\n", "not a list of {title, keys (one * at"),
    ("command: python train.py\nstats: m.jsonl\nreports: [{title: E, keys: a}]\n",
     "reports are read from the bucket's copy of the stats file, and stats m.jsonl lies in no sync folder. Name a"),
    ("command: python train.py\nray: yes please\n", "ray is 'yes please', not true or false"),
    ("- python\n", "holds no mapping"),
    ("command: [unclosed\n", "is not YAML we can read: "),
])
def test_each_mistake_in_gantry_yaml_is_one_line_naming_the_key(tmp_path, text, problem):
    (tmp_path / "gantry.yaml").write_text(text)
    with pytest.raises(GantryError) as error:
        program_file.load(tmp_path)
    assert problem in error.value.line() and "\n" not in error.value.line()


def test_a_duplicated_key_is_named_with_its_line(tmp_path):
    (tmp_path / "gantry.yaml").write_text("command: python train.py\ncommand: python other.py\n")
    with pytest.raises(GantryError, match=r"'command' is given twice.*line 2"):
        program_file.load(tmp_path)


def test_a_check_that_is_not_on_this_machine_is_one_line(tmp_path):
    (tmp_path / "gantry.yaml").write_text("command: python train.py\ncheck: no-such-checker --strict\n")
    with pytest.raises(GantryError, match="the check of .* \\(no-such-checker\\) is not a program on this machine"):
        program_file.run_check(program_file.load(tmp_path), ["--epochs=1"])
