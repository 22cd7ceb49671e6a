"""Static checks of infra/ that need no cloud and no google provider: terraform fmt, the
provider-free modules' own `terraform test` suites, checkov with justified skips, shellcheck
on every shell script, and the root module passing node_shape every input.

Root-module plan tests against the stand-in provider live in infra/tests (issue 10)."""

import json
import re

import pytest
from infra_tools import (
    INFRA,
    MODULES,
    PROVIDER_FREE_MODULES,
    REPO,
    checkov_binary,
    require_tool,
    run,
    terraform_env,
)

pytestmark = pytest.mark.terraform

TERRAFORM_HINT = "install Terraform >= 1.9 (CI machines have 1.11)"
SHELLCHECK_HINT = "run scripts/ci-setup.d/10-shellcheck.sh (apt-get install shellcheck)"


def test_terraform_fmt_is_clean():
    require_tool("terraform", TERRAFORM_HINT)
    result = run(
        ["terraform", "fmt", "-check", "-recursive", "-diff", "infra"], env=terraform_env(REPO / ".cache")
    )
    assert result.returncode == 0, f"run `terraform fmt -recursive infra`:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("module", PROVIDER_FREE_MODULES)
def test_provider_free_module_tests_pass(module, tmp_path):
    require_tool("terraform", TERRAFORM_HINT)
    module_dir = MODULES / module
    env = terraform_env(tmp_path / "tf-data")
    init = run(
        ["terraform", f"-chdir={module_dir}", "init", "-backend=false", "-input=false", "-no-color"], env=env
    )
    assert init.returncode == 0, init.stderr
    result = run(["terraform", f"-chdir={module_dir}", "test", "-no-color"], env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    runs_declared = sum(
        len(re.findall(r'^run "', path.read_text(), flags=re.MULTILINE))
        for path in (module_dir / "tests").glob("*.tftest.hcl")
    )
    summary = re.search(r"Success! (\d+) passed, 0 failed", output)
    assert summary and int(summary.group(1)) == runs_declared, output


def _run_blocks(path):
    """(name, body) of each run block; bodies are small and have no nested run blocks."""
    text = path.read_text()
    starts = [(m.start(), m.group(1)) for m in re.finditer(r'^run "([^"]+)"', text, flags=re.MULTILINE)]
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return [(name, text[start:end]) for (start, name), end in zip(starts, ends)]


def test_node_shape_tests_cover_every_use_gpu_spot_combination():
    combos = set()
    for _name, body in _run_blocks(MODULES / "node_shape" / "tests" / "shapes.tftest.hcl"):
        use_gpu = bool(re.search(r"^\s*use_gpu\s*=\s*true", body, flags=re.MULTILINE))
        spot = bool(re.search(r"^\s*spot\s*=\s*true", body, flags=re.MULTILINE))
        combos.add((use_gpu, spot))
    assert combos == {(False, False), (False, True), (True, False), (True, True)}


def _variable_blocks(path):
    """name -> full text of each top-level variable block (closing brace at column 0)."""
    pattern = r'^(variable "([^"]+)" \{\n.*?\n\})$'
    return {
        m.group(2): m.group(1) for m in re.finditer(pattern, path.read_text(), flags=re.MULTILINE | re.DOTALL)
    }


# The GPUs that attach to N1 (Google's "GPU platforms" page) and their compute capability (NVIDIA's CUDA GPUs
# table): facts of the world, not of this repository; docker/torch.json's min_compute_capability picks among them.
N1_GPU_COMPUTE_CAPABILITY = {"nvidia-tesla-t4": 7.5, "nvidia-tesla-p4": 6.1, "nvidia-tesla-p100": 6.0,
                             "nvidia-tesla-v100": 7.0}


def test_accelerator_types_are_the_gpus_the_cuda_images_torch_has_kernels_for():
    """CUDA 13 builds have no kernels below sm_75: a P4, P100 or V100 node would boot, pass the driver check and
    fail at the first kernel. accelerator_type's rule takes infra/gpu_shapes.json's GPUs, each at or above
    docker/torch.json's compute capability (issue #32), and none of the older N1 GPUs."""
    pins = json.loads((REPO / "docker" / "torch.json").read_text())
    block = _variable_blocks(INFRA / "variables.tf")["accelerator_type"]
    assert 'contains(keys(try(jsondecode(file("${path.module}/gpu_shapes.json")).gpus, {})), var.accelerator_type)' in block
    gpus = json.loads((INFRA / "gpu_shapes.json").read_text())["gpus"]
    assert all(gpu["compute_capability"] >= float(pins["min_compute_capability"]) for gpu in gpus.values()), gpus
    too_old = [gpu for gpu, cc in N1_GPU_COMPUTE_CAPABILITY.items() if cc < float(pins["min_compute_capability"])]
    assert too_old and not set(too_old) & set(gpus)


def test_the_required_cuda_is_the_cuda_images_one_fact():
    """infra's required CUDA is docker/torch.json's cuda (the CUDA image holds to it in install_torch.sh), with
    required_cuda_version a null-default override, not a second copy that drifts (it said 12.8 while the image
    carried 13.0)."""
    block = _variable_blocks(INFRA / "variables.tf")["required_cuda_version"]
    assert re.search(r"^\s*default\s*=\s*null$", block, flags=re.MULTILINE), block
    module_block = _variable_blocks(MODULES / "startup_script" / "variables.tf")["required_cuda_version"]
    assert "default" not in module_block  # the root module passes it; no module-side copy
    locals_tf = (INFRA / "locals.tf").read_text()
    assert re.search(r'required_cuda_version\s*=\s*coalesce\(var\.required_cuda_version, '
                     r'jsondecode\(file\("\$\{path\.module\}/\.\./docker/torch\.json"\)\)\.cuda\)', locals_tf)
    assert "required_cuda_version = local.required_cuda_version" in (INFRA / "main.tf").read_text()


def test_root_module_passes_every_node_shape_input():
    main_tf = (INFRA / "main.tf").read_text()
    call = re.search(r'module "node_shape" \{(.*?)\n\}', main_tf, flags=re.DOTALL).group(1)
    passed = set(re.findall(r"^\s*(\w+)\s*=\s*var\.(\w+)", call, flags=re.MULTILINE))
    module_inputs = set(_variable_blocks(MODULES / "node_shape" / "variables.tf"))
    assert {name for name, _ in passed} == module_inputs
    assert all(name == source for name, source in passed)


def test_every_root_output_is_read_by_the_launcher():
    """An output nothing reads is an interface nobody maintains: each one must be read by name in packages/gantry."""
    names = re.findall(r'^output "([^"]+)"', (INFRA / "outputs.tf").read_text(), flags=re.MULTILINE)
    launcher = "\n".join(path.read_text() for path in (REPO / "packages" / "gantry").rglob("*.py"))
    unread = [name for name in names if not re.search(rf"[\"']{name}[\"']", launcher)]
    assert names and not unread, f"root outputs no launcher code reads (delete them, or read them): {unread}"


def test_the_tpu_nodes_role_grants_the_permission_the_agent_names():
    """The agent's 403 line names TPU_STOP_PERMISSION as what the role in infra/iam.tf grants: they must agree."""
    from gantry_agent.settings import TPU_STOP_PERMISSION

    role = re.search(r'resource "google_project_iam_custom_role" "tpu_self_stop" \{(.*?)\n\}', (INFRA / "iam.tf").read_text(),
                     flags=re.DOTALL)
    assert role and f'"{TPU_STOP_PERMISSION}"' in role.group(1)


def test_docs_and_the_launcher_state_the_terraform_version_infra_requires():
    required = re.search(r'required_version = ">= ([0-9.]+)"', (INFRA / "terraform.tf").read_text()).group(1)
    places = [REPO / "packages" / "gantry" / "terraform.py", REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    stated = {(path.relative_to(REPO).as_posix(), version) for path in places
              for version in re.findall(r"Terraform (?:>=|≥) ?([0-9]+\.[0-9]+)", path.read_text())}
    assert any(path.endswith("terraform.py") for path, _ in stated), "INSTALL_HINT no longer names a version"
    wrong = sorted((path, version) for path, version in stated if version != required)
    assert not wrong, f"infra/terraform.tf requires Terraform >= {required}; these say otherwise: {wrong}"


def _shell_scripts():
    return sorted(
        path.relative_to(REPO).as_posix()
        for pattern in ("scripts/**/*.sh", "docker/**/*.sh", "infra/**/*.sh")
        for path in REPO.glob(pattern)
        if ".terraform" not in path.parts
    )


@pytest.mark.parametrize("script", _shell_scripts())
def test_shell_script_passes_shellcheck(script):
    require_tool("shellcheck", SHELLCHECK_HINT)
    result = run(["shellcheck", "--severity=style", "--external-sources", script])
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_checkov_skip_is_justified():
    skips = []
    for path in INFRA.rglob("*.tf"):
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            match = re.search(r"#\s*checkov:skip=([A-Z0-9_]+)(?::\s*(.*))?", line)
            if match:
                skips.append(
                    (f"{path.relative_to(REPO)}:{line_no}", match.group(1), (match.group(2) or "").strip())
                )
    assert skips, "expected the documented skips (CKV_GCP_26, 38, 62, 78, 84)"
    unjustified = [(where, check) for where, check, reason in skips if len(reason.split()) < 6]
    assert not unjustified, f"each #checkov:skip needs a reason after the check id: {unjustified}"


def _checkov(directory, framework):
    result = run(
        [
            checkov_binary(),
            "--directory",
            directory,
            "--framework",
            framework,
            "--skip-download",
            "--output",
            "json",
        ],
        env=None,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [
        f"{check['check_id']} {check['resource']} ({check['file_path']}:{check['file_line_range'][0]}): {check['check_name']}"
        for entry in reports
        for check in entry["results"]["failed_checks"]
    ]
    passed = sum(len(entry["results"]["passed_checks"]) for entry in reports)
    return failed, passed


@pytest.mark.slow
def test_checkov_passes_on_infra():
    failed, passed = _checkov(INFRA, "terraform")
    assert not failed, "checkov failures (fix them, or skip inline with a reason):\n" + "\n".join(failed)
    assert passed > 20, "checkov ran suspiciously few checks on infra/"


@pytest.mark.slow
def test_checkov_passes_on_dockerfiles():
    dockerfiles = sorted((REPO / "docker").glob("Dockerfile*")) if (REPO / "docker").is_dir() else []
    if not dockerfiles:
        pytest.skip("docker/ has no Dockerfiles yet")
    failed, passed = _checkov(REPO / "docker", "dockerfile")
    assert not failed, "checkov failures in docker/:\n" + "\n".join(failed)
    assert passed > 0


def test_tfvars_example_sets_only_declared_variables():
    declared = set(_variable_blocks(INFRA / "variables.tf"))
    example = (INFRA / "terraform.tfvars.example").read_text()
    # Commented-out lines are examples too: `# use_gpu = true` must name a real variable.
    keys = set(re.findall(r"^#?\s*([a-z_]+)\s+=", example, flags=re.MULTILINE))
    assert {"project_id", "use_gpu", "node_count", "spot", "max_run_hours"} <= keys
    assert keys <= declared, f"terraform.tfvars.example names undeclared variables: {sorted(keys - declared)}"


def test_providers_bill_the_project_and_the_setup_apis_are_required():
    """User credentials without a quota project get 403s from Service Usage (terraform-provider-google #7351, #1538):
    both providers bill calls to the project, with arguments the real provider's schema has (the stand-in serves
    it), and required_apis lists the APIs preflight asks the user to enable first (gantry.preflight.project_setup)."""
    from gantry.preflight.project_setup import SETUP_APIS

    providers = (INFRA / "providers.tf").read_text()
    blocks = re.findall(r'^provider "([\w-]+)" \{(.*?)^\}', providers, re.MULTILINE | re.DOTALL)
    assert [name for name, _ in blocks] == ["google", "google-beta"]
    for name, body in blocks:
        assert re.search(r"^\s*user_project_override\s*=\s*true$", body, re.MULTILINE), name
        assert re.search(r"^\s*billing_project\s*=\s*var\.project_id$", body, re.MULTILINE), name
        schema = json.loads((REPO / "tools/tf-standin" / f"{name.replace('-', '_')}_schema_8.7.0.json").read_text())
        attributes = schema["provider"]["block"]["attributes"]
        assert attributes["user_project_override"]["type"] == "bool" and attributes["billing_project"]["type"] == "string"
    locals_tf = (INFRA / "locals.tf").read_text()
    required = locals_tf.split("required_apis = concat([", 1)[1].split("]", 1)[0]
    assert all(f'"{api}"' in required for api in SETUP_APIS)


def test_infra_md_names_every_api_apply_enables():
    locals_tf = (INFRA / "locals.tf").read_text()
    required = re.findall(r'"([a-z]+)\.googleapis\.com"', locals_tf.split("required_apis = concat(", 1)[1].split(")", 1)[0])
    [row] = [line for line in (REPO / "docs/INFRA.md").read_text().splitlines() if line.startswith("| APIs |")]
    named = re.findall(r"[a-z]+", row.split("|")[2].split("(")[0])
    assert sorted(named) == sorted(api for api in required if api != "tpu"), row
    assert "tpu with `use_tpu`" in row


def test_terraform_spells_the_run_key_as_the_launch_contract_does():
    """ignore_changes takes no expressions, so infra/main.tf and infra/tpu.tf name the run spec's key literally; if
    it drifted from launch_contract.RUN_KEY, `make apply` would wipe the launcher's run spec from every node."""
    from launch_contract import RUN_KEY

    assert f'run_metadata_key    = "{RUN_KEY}"' in (MODULES / "startup_script" / "main.tf").read_text()
    for name in ("main.tf", "tpu.tf"):
        ignored = [line for line in (INFRA / name).read_text().splitlines() if "ignore_changes" in line]
        assert any(f'metadata["{RUN_KEY}"]' in line for line in ignored), (name, ignored)
