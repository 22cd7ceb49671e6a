"""The gantry command itself: entry point, help that teaches the workflow, exit codes."""

import subprocess
import sys
from pathlib import Path

import pytest
from gantry.cli import VERBS, build_parser, main
from gantry.status import ExitStatus
from launcher_helpers import REPO, Deployment, isolated_environ, needs_terraform, run_module
from suite_make import MAKE


def test_top_level_help_shows_the_workflow(tmp_path):
    result = run_module(["--help"], tmp_path, isolated_environ(tmp_path))
    assert result.returncode == 0
    for verb in ("preflight", "cost", "apply", "destroy"):
        assert verb in result.stdout
    assert "make preflight" in result.stdout and "examples:" in result.stdout
    assert "terraform.tfvars.example" in result.stdout


@pytest.mark.parametrize("verb", [v.NAME for v in VERBS])
def test_each_verb_help_states_the_consequence_and_ends_with_examples(verb, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([verb, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert text.index("options:") < text.index("examples:")  # help ends with the examples
    assert text.rstrip().splitlines()[-1].lstrip().startswith(("gantry ", "make ", "gcloud "))


def test_consequences_are_spelled_out():
    text = {v.NAME: v.DESCRIPTION for v in VERBS}
    assert "without creating anything" in text["preflight"]
    assert "bill" in text["apply"]
    assert "kept unless --delete-data" in text["destroy"] and "-y" in text["destroy"]


def test_usage_errors_exit_2(capsys):
    assert main(["launch"]) == ExitStatus.USAGE
    assert main([]) == ExitStatus.USAGE
    assert "invalid choice" in capsys.readouterr().err


def test_a_flag_run_does_not_know_gets_runs_usage_and_the_hint_about_dashes(capsys):
    assert main(["run", "--detach", "--search.simulations=100"]) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: gantry run [-h]"), err
    assert err.splitlines()[-1] == ("gantry run: error: unrecognized arguments: --search.simulations=100"
                                    "; the program's own flags go after --: gantry run [OPTIONS] -- "
                                    "--search.simulations=100")


@pytest.mark.parametrize("words", [["--gpus", "2"], ["--gpus=4", "--detach"]])
def test_gantry_run_gpus_says_where_the_gpu_count_lives(words, tmp_path):
    """The GPUs per node are a setting of the nodes (infra/variables.tf), not of a run: say which and where."""
    from gantry.cli.run import GPUS_PER_NODE
    from gantry.config import Deployment

    assert f'variable "{GPUS_PER_NODE}"' in (REPO / "infra" / "variables.tf").read_text()
    assert GPUS_PER_NODE in Deployment.__dataclass_fields__  # what `make cost` and preflight read as GPUs per node
    result = run_module(["run", *words], tmp_path, isolated_environ(tmp_path))
    assert result.returncode == ExitStatus.USAGE
    assert result.stderr.splitlines()[-1] == (
        f"gantry run: error: unrecognized arguments: {words[0]}; the GPUs per node are the deployment's: set use_gpu "
        "= true and accelerator_count = N in infra/terraform.tfvars, then `make apply`; your program's own flags go "
        "after --: gantry run [OPTIONS] -- python train.py --gpus all")
    assert not (tmp_path / "infra").exists()  # nothing was asked of terraform or Google


def test_main_module_is_tiny():
    # a lazy import and the two failures no verb can catch: Ctrl-C, and a launcher without its cloud packages
    lines = (REPO / "packages" / "gantry" / "__main__.py").read_text().splitlines()
    assert len(lines) < 30


@pytest.mark.parametrize("module", ["python_terraform"])
def test_gantry_without_the_cloud_extra_says_to_run_make_install_dev(module):
    """`make install` is the trainer alone; its `gantry --help` used to die in a ModuleNotFoundError traceback."""
    code = (f"import sys; sys.modules[{module!r}] = None; sys.argv = ['gantry', '--help']\n"
            "from gantry.__main__ import main; sys.exit(main())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == ExitStatus.ERROR
    assert result.stdout == ""
    assert result.stderr.splitlines() == [(f"gantry: error: no module {module}: the launcher's cloud packages are "
                                           "not installed. Run `make install-dev`.")]


def test_a_verb_whose_lazy_google_import_fails_gets_the_same_line(monkeypatch, capsys):
    import gantry.cli.cost as cost_verb

    def run(args, env):
        raise ModuleNotFoundError("No module named 'google.cloud.compute_v1'", name="google.cloud.compute_v1")

    monkeypatch.setattr(cost_verb, "run", run)
    assert main(["cost"]) == ExitStatus.ERROR
    assert capsys.readouterr().err.splitlines() == [
        ("gantry: error: no module google.cloud.compute_v1: the launcher's cloud packages are not installed. "
         "Run `make install-dev`.")]


def test_a_missing_module_that_is_not_the_cloud_extra_still_raises():
    from gantry.errors import missing_cloud_extra

    assert missing_cloud_extra(ModuleNotFoundError("x", name="yaml")) is None


@pytest.mark.terraform
@needs_terraform  # cost reads infra/terraform.tfvars through terraform
def test_cost_needs_no_cloud(tmp_path):
    deployment = Deployment(tmp_path)
    deployment.write(spot=True, max_run_hours=4)
    result = run_module(["cost"], tmp_path, isolated_environ(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "Spot" in result.stdout and "a run of max_run_hours = 4" in result.stdout


@pytest.mark.terraform
@needs_terraform
def test_without_terraform_a_verb_says_terraform_not_found_and_how_to_install_it(tmp_path):
    """docs/TROUBLESHOOTING.md's `terraform not found`: what `make cost` says on a machine without the binary, and the
    `terraform version` its fix asks for, on one with it."""
    deployment = Deployment(tmp_path)
    deployment.write()
    bare = tmp_path / "bin"  # a PATH without terraform (the interpreter is run by its full path)
    bare.mkdir()
    result = run_module(["cost"], tmp_path, isolated_environ(tmp_path, PATH=str(bare)))
    assert result.returncode == ExitStatus.ERROR and result.stdout == ""
    assert result.stderr.startswith("gantry: error: terraform not found (looked for 'terraform' on PATH)"), result.stderr
    assert "https://developer.hashicorp.com/terraform/install" in result.stderr and "`terraform version`" in result.stderr
    version = subprocess.run(["terraform", "version"], capture_output=True, text=True, timeout=60, check=False)
    assert version.returncode == 0 and version.stdout.startswith("Terraform v"), version.stderr


@pytest.mark.terraform
@needs_terraform
def test_cost_trc_calls_a_tpu_free_through_the_command_line_and_still_shows_its_list_price(tmp_path):
    """`make cost ARGS=--trc` (docs/TPU.md) for a TPU deployment: free under a TRC allocation, the list price beside."""
    deployment = Deployment(tmp_path)
    deployment.write(use_tpu=True, tpu_type="v3-8", max_run_hours=8)
    result = run_module(["cost", "--trc"], tmp_path, isolated_environ(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "free under a TRC allocation" in result.stdout and "$ 8.000/h" in result.stdout, result.stdout


@pytest.mark.terraform
@needs_terraform
@pytest.mark.parametrize("accelerator_type, machine_type", [("nvidia-l4", "g2-standard-96"),
                                                           ("nvidia-tesla-a100", "a2-highgpu-8g")])
def test_cost_of_an_eight_gpu_node_prices_its_host_and_its_gpus(tmp_path, accelerator_type, machine_type):
    """`make cost` for 8 x L4 (G2) and 8 x A100 (A2), as a user's tfvars asks: the machine type the count derives,
    its host and its GPUs priced apart (Google's two SKUs), the total the two and the disk make."""
    import re

    deployment = Deployment(tmp_path)
    deployment.write(use_gpu=True, accelerator_type=accelerator_type, accelerator_count=8)
    result = run_module(["cost"], tmp_path, isolated_environ(tmp_path))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Deployment: 1 x {machine_type} + 8 x {accelerator_type} (on-demand)" in out, out
    host, gpus, disk, total = (float(re.search(rf"{re.escape(what)}.*\$ *([0-9.]+)/h", out).group(1))
                               for what in (f"  {machine_type} (", f"8 x {accelerator_type}, on-demand", "boot disk",
                                            "1 node in total"))
    assert host > 0 and gpus > 0 and total == pytest.approx(host + gpus + disk, abs=0.002)
    print(out)  # with -s: what a new user sees (the closing notes quote it)


def test_console_script_is_declared():
    assert 'gantry = "gantry.__main__:main"' in (REPO / "pyproject.toml").read_text()
    assert Path(REPO / "packages" / "gantry" / "prices.json").exists()


@pytest.mark.slow
def test_make_shows_gantrys_status_and_the_console_script_returns_it(tmp_path):
    """GNU make exits 2 whatever its recipe returned (its own rule), so the status a script can rely on is the
    console script's; make's last line still carries gantry's number (docs/TROUBLESHOOTING.md)."""
    from local_cloud.compute import FakeCompute
    from local_cloud.googleapis import FakeGoogleApis

    deployment = Deployment(tmp_path)
    deployment.write(use_gpu=True)
    with FakeCompute.us_central1(gpu_quota=0) as fake, FakeGoogleApis() as apis:
        environ = isolated_environ(tmp_path, GANTRY_COMPUTE_ENDPOINT=fake.endpoint,
                                   GANTRY_GOOGLEAPIS_ENDPOINT=apis.endpoint)
        made = subprocess.run([*MAKE, "preflight", f"ARGS=--infra-dir {deployment.infra}"],
                              capture_output=True, text=True, env=environ, timeout=300, check=False)
        script = subprocess.run([str(Path(sys.executable).with_name("gantry")), "preflight",
                                 "--infra-dir", str(deployment.infra)],
                                capture_output=True, text=True, env=environ, timeout=120, check=False)
    assert made.returncode == 2 and f"] Error {ExitStatus.CHECK_FAILED.value}" in made.stderr, made.stderr
    assert script.returncode == ExitStatus.CHECK_FAILED, script.stderr
    assert script.stderr.count("gantry: error:") == 1 and "blocker" in script.stderr
