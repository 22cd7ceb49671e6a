"""infra/terraform.tfvars -> Deployment: the subset of HCL people write, checked by Terraform against
infra/variables.tf (the real terraform binary), with one-line errors that name the line and the fix."""

import re
import shutil

import pytest
from checkout import REPO
from gantry import config
from gantry.errors import ConfigError
from launcher_helpers import needs_terraform

INFRA = REPO / "infra"
# gantry reads infra/ through the terraform binary: skip, not fail, where there is none (the dev container)
pytestmark = [pytest.mark.terraform, needs_terraform]


def test_reads_strings_numbers_bools_and_skips_comments(tmp_path):
    path = tmp_path / "terraform.tfvars"
    path.write_text(
        '# my deployment\n'
        'project_id = "my-proj" # trailing comment\n'
        'zone       = "us-central1-b" // other comment style\n'
        'deployment_name = "run-1" # a comment after a string\n'
        'use_gpu = true\n'
        'node_count = 3\n'
        'max_run_hours = 1.5\n'
        'spot = false\n'
    )
    d = config.load(path, INFRA)
    assert d.project_id == "my-proj"
    assert d.zone == "us-central1-b"
    assert d.deployment_name == "run-1"
    assert d.use_gpu is True and d.node_count == 3 and d.max_run_hours == 1.5 and d.spot is False
    assert d.machine_type == "n1-standard-8"  # use_gpu picks the GPU shape
    assert d.labels_filter == 'labels.gantry-deployment = "run-1"'


def test_fallback_zones_load_as_a_tuple(tmp_path):
    path = tmp_path / "terraform.tfvars"
    path.write_text('project_id = "my-project"\nfallback_zones = ["us-central1-b", "us-central1-c"]\n')
    assert config.load(path, INFRA).fallback_zones == ("us-central1-b", "us-central1-c")


def test_the_defaults_are_read_from_variables_tf(tmp_path):
    """Deployment has no defaults of its own: a default changed in variables.tf is what gantry reads."""
    infra = tmp_path / "infra"
    infra.mkdir()
    text = (INFRA / "variables.tf").read_text()
    changed = text.replace('default     = "us-central1-a"', 'default     = "us-central1-c"', 1)
    assert changed != text
    (infra / "variables.tf").write_text(changed)
    for table in INFRA.glob("*.json"):  # the tables the rules read
        shutil.copy(table, infra / table.name)
    path = infra / "terraform.tfvars"
    path.write_text('project_id = "my-project"\n')
    d = config.load(path)
    assert d.zone == "us-central1-c" and d.node_count == 1 and d.fallback_zones == ()


def test_terraform_reads_what_gantry_never_parsed(tmp_path):
    """HCL beyond key = value lines (a list over several lines, comments inside it) is Terraform's to read."""
    path = tmp_path / "terraform.tfvars"
    path.write_text('project_id = "my-project"\nfallback_zones = [\n  "us-central1-b", # first\n  "us-central1-c",\n]\n'
                    'spot = "true"\n')
    d = config.load(path, INFRA)
    assert d.fallback_zones == ("us-central1-b", "us-central1-c") and d.spot is True


def test_missing_file_says_to_copy_the_example(tmp_path):
    with pytest.raises(ConfigError) as info:
        config.load(tmp_path / "infra" / "terraform.tfvars")
    assert "terraform.tfvars.example" in info.value.fix and "project_id" in info.value.fix


@pytest.mark.parametrize("text, expected", [
    ('zone = "us-central1-a"\n', "does not set project_id"),
    ('project_id = "Bad_ID"\n', "terraform.tfvars:1: project_id = \"Bad_ID\". project_id must be a GCP project ID"),
    ('project_id = "my-project"\nnode_count = "two"\n', ':2: node_count = "two". node_count: a number is required'),
    ('project_id = "my-project"\nuse_gpu = 1\n', ":2: use_gpu = 1. use_gpu: bool required"),
    ('project_id = "my-project"\nnode_count = 0\n', "node_count must be a whole number >= 1"),
    ('project_id = "my-project"\nzone = "europe-west4-a"\n', "zone must be a zone of region"),
    ('project_id = "my-project"\nmax_run_hours = -3\n', ":2: max_run_hours = -3. max_run_hours must be 0"),
    ('project_id = "my-project"\ncpu_machine_type = "c4-highcpu-22"\n', "c4-highcpu-22 does not exist"),
    ('project_id = "my-project"\nzone = us-central1-a\n', ":2: zone = us-central1-a"),
    ('project_id = "my-project"\nthis is not hcl\n', ":2: this is not hcl"),
    ('project_id = "my-project\n', ":1:"),
    ('project_id = "my-project"\nuse_gpus = true\n', "sets use_gpus, which is not a setting of"),
    ('project_id = "my-project"\nuse_gpus = true\n', "Did you mean use_gpu?"),
    ('project_id = "my-project"\nnode_count = 0\nmax_run_hours = -1\n', ":2: node_count = 0 (and 1 more problem, line 3). node_count must be"),
])
def test_bad_files_name_the_line_and_the_fix(tmp_path, text, expected):
    path = tmp_path / "terraform.tfvars"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        config.load(path, INFRA)
    assert expected in info.value.line()


def test_reads_the_infra_example_that_users_copy():
    example = REPO / "infra" / "terraform.tfvars.example"
    if not example.exists():
        pytest.skip("infra/terraform.tfvars.example is not in this checkout yet")
    d = config.load(example)
    assert d.project_id and d.machine_type


def uncommented(example: str, block: str) -> str:
    """The example with the `# key = value` lines of the block whose comment starts with `block` uncommented."""
    lines, inside = [], False
    for line in example.splitlines():
        inside = line.startswith(f"# {block}") or (inside and line.strip() != "")
        setting = re.match(r"^# ([a-z_]+\s+=.*)$", line)
        lines.append(setting.group(1) if inside and setting else line)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("block, expected", [
    ("GPU path", {"use_gpu": True, "accelerator_count": 1}),
    ("TPU path", {"use_tpu": True, "tpu_type": "v3-8"}),
    ("fallback_zones", {"fallback_zones": ("us-central1-b", "us-central1-c")})])
def test_uncommenting_a_block_of_the_infra_example_is_the_whole_change(tmp_path, block, expected):
    example = (INFRA / "terraform.tfvars.example").read_text()
    path = tmp_path / "terraform.tfvars"
    path.write_text(uncommented(example, block))
    assert path.read_text() != example, f"the example has no commented {block} block"
    d = config.load(path, INFRA)  # Terraform's own reading: a redefined attribute or a broken rule fails here
    assert {key: getattr(d, key) for key in expected} == expected


def test_strings_terraform_converts_are_converted(tmp_path):
    path = tmp_path / "terraform.tfvars"
    path.write_text('project_id = "my-project"\nmax_run_hours = "2"\nspot = "true"\n')
    d = config.load(path, INFRA)
    assert (d.max_run_hours, d.spot) == (2, True)


def test_a_folder_given_as_the_settings_file_is_named_as_a_folder(tmp_path):
    with pytest.raises(ConfigError, match="is a folder, not a file"):
        config.load(tmp_path, INFRA)
