"""infra/terraform.tfvars -> Deployment: the subset of HCL people write, and clear errors."""

from pathlib import Path

import pytest
from gantry import config
from gantry.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def test_reads_strings_numbers_bools_and_skips_comments_and_blocks(tmp_path):
    path = tmp_path / "terraform.tfvars"
    path.write_text(
        '# my deployment\n'
        'project_id = "my-proj" # trailing comment\n'
        'zone       = "us-central1-b" // other comment style\n'
        'deployment_name = "run#1"\n'
        'use_gpu = true\n'
        'node_count = 3\n'
        'max_run_hours = 1.5\n'
        'labels = {\n  team = "rl" # a map gantry does not need\n  tier = "dev"\n}\n'
        'extra_tags = ["a",\n "b"]\n'
        'startup = <<EOT\necho hi\nEOT\n'
        'spot = false\n'
    )
    d = config.load(path)
    assert d.project_id == "my-proj"
    assert d.zone == "us-central1-b"
    assert d.deployment_name == "run#1"
    assert d.use_gpu is True and d.node_count == 3 and d.max_run_hours == 1.5 and d.spot is False
    assert d.machine_type == "n1-standard-8"  # use_gpu picks the GPU shape
    assert d.labels_filter == 'labels.gantry-deployment = "run#1"'


def test_defaults_match_the_infra_variables(tmp_path):
    path = tmp_path / "terraform.tfvars"
    path.write_text('project_id = "p"\n')
    d = config.load(path)
    assert (d.region, d.zone, d.deployment_name, d.use_gpu, d.node_count) == \
        ("us-central1", "us-central1-a", "gantry", False, 1)
    assert (d.cpu_machine_type, d.gpu_machine_type, d.accelerator_type, d.accelerator_count) == \
        ("c4-highcpu-16", "n1-standard-8", "nvidia-tesla-t4", 1)
    assert (d.spot, d.max_run_hours) == (False, 0)


def test_missing_file_says_to_copy_the_example(tmp_path):
    with pytest.raises(ConfigError) as info:
        config.load(tmp_path / "infra" / "terraform.tfvars")
    assert "terraform.tfvars.example" in info.value.fix and "project_id" in info.value.fix


@pytest.mark.parametrize("text, expected", [
    ('zone = "us-central1-a"\n', "does not set project_id"),
    ('project_id = "p"\nnode_count = "two"\n', "node_count must be a number"),
    ('project_id = "p"\nuse_gpu = 1\n', "use_gpu must be true or false"),
    ('project_id = "p"\nnode_count = true\n', "node_count must be a number"),
    ('project_id = "p"\nzone = "europe-west4-a"\n', "is not in region us-central1"),
    ('project_id = "p"\nzone = us-central1-a\n', "cannot read the value of zone"),
    ('project_id = "p"\nthis is not hcl\n', ":2: cannot read"),
    ('project_id = "p\n', "malformed string"),
])
def test_bad_files_name_the_line_and_the_fix(tmp_path, text, expected):
    path = tmp_path / "terraform.tfvars"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load(path)
    assert expected in info.value.line()


def test_reads_the_infra_example_that_users_copy():
    example = REPO / "infra" / "terraform.tfvars.example"
    if not example.exists():
        pytest.skip("infra/terraform.tfvars.example is not in this checkout yet")
    d = config.load(example)
    assert d.project_id and d.machine_type
