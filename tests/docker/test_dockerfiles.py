"""Static checks of docker/: the Dockerfiles lint clean (hadolint; the CUDA and TPU ones cannot be built on
machines without CUDA wheels or a TPU, so this is their check), every checkov skip says why, the shell scripts
pass shellcheck, compose.yaml has the cpu and gpu profiles that docs/DOCKER.md promises, and the dev
container's files (.devcontainer/) lint clean and fit an engine without a bridge or a GPU."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout import REPO

DOCKERFILES = [REPO / "docker" / "Dockerfile", REPO / "docker" / "Dockerfile.tpu"]  # CPU and CUDA by FLAVOUR; TPU
# The dev container's layer on top of the CPU image (.devcontainer/; run for real in test_devcontainer.py).
DEV_DOCKERFILE = REPO / ".devcontainer" / "Dockerfile"
SCRIPTS = [REPO / "docker" / "entrypoint.sh", REPO / "docker" / "install_torch.sh",
           REPO / "scripts" / "docker_base.sh", REPO / "scripts" / "ci-setup.d" / "20-docker.sh",
           REPO / "scripts" / "ci-setup.d" / "30-devcontainer-cli.sh", REPO / ".devcontainer" / "trainer_image.sh",
           REPO / "scripts" / "xla_venv.sh"]


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip(f"{name} is not installed (make install-dev / scripts/ci-setup.d install it)")
    return found


@pytest.mark.parametrize("dockerfile", [*DOCKERFILES, DEV_DOCKERFILE], ids=lambda p: p.parent.name + "/" + p.name)
def test_dockerfile_lints_clean(dockerfile):
    result = subprocess.run([tool("hadolint"), "--no-color", str(dockerfile)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", [*DOCKERFILES, DEV_DOCKERFILE], ids=lambda p: p.parent.name + "/" + p.name)
def test_every_checkov_skip_is_justified(dockerfile):
    skips = [line for line in dockerfile.read_text().splitlines() if "checkov:skip=" in line]
    for line in skips:
        assert re.match(r"^# checkov:skip=CKV\d?_DOCKER_\d+: \S.{20,}$", line), f"unjustified skip: {line}"


def test_cpu_and_cuda_are_one_dockerfile_and_the_tpu_one_takes_the_same_steps():
    """CPU and CUDA differ only in FLAVOUR (which torch install_torch.sh takes, what the import check expects, and
    GANTRY_IMAGE_FLAVOUR, by which the entry point checks the GPU); the TPU image must not drift from their steps."""
    def steps(path: Path) -> list[str]:
        text = re.sub(r"\\\n\s*", " ", path.read_text())
        return [line.split()[0] for line in text.splitlines() if line and not line.startswith("#")]

    one, tpu = DOCKERFILES
    assert [s for s in steps(one) if s != "ARG"] == [s for s in steps(tpu) if s != "ARG"]
    text = one.read_text()
    assert text.count("ARG FLAVOUR=cpu") == 2  # each stage declares it: the builder installs, the image says which
    assert 'install_torch.sh "${FLAVOUR}"' in text and "GANTRY_IMAGE_FLAVOUR=${FLAVOUR}" in text
    assert '"${GANTRY_REQUIRE_CUDA:-${GANTRY_IMAGE_FLAVOUR:-cpu}}" in' in (REPO / "docker" / "entrypoint.sh").read_text()


@pytest.mark.parametrize("path", [*DOCKERFILES, REPO / "Makefile"], ids=lambda p: p.name)
def test_torch_and_its_index_are_named_only_in_docker_torch_json(path):
    """One fact, one place: the Makefile and the Dockerfiles take torch's version, its CUDA and its index from
    docker/torch.json (through docker/torch_pins.py); a second copy drifts (the old cu128 index had no 2.13)."""
    code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
    assert not re.search(r"torch(_xla|-xla)?==|download\.pytorch\.org|/whl/cu\d", code), path
    if path.name.startswith("Dockerfile"):
        assert "docker/torch.json" in code and "docker/torch_pins.py" in code
    else:
        assert "docker/torch_pins.py install" in code and "docker/torch.json" in code  # a new pin reinstalls


def test_install_torch_holds_the_cuda_image_to_the_pinned_cuda():
    """The CUDA image must carry the CUDA infra requires of the driver: install_torch.sh compares torch.version.cuda
    with torch.json's cuda and fails the build otherwise."""
    install = (REPO / "docker" / "install_torch.sh").read_text()
    assert '"$build/torch.json"' in install and 'json.load(open(sys.argv[2]))["cuda"]' in install
    assert 'torch.version.cuda.split(".")[:2]) != pinned_cuda' in install


def test_the_tpu_image_takes_torch_and_torch_xla_from_the_one_pins_file():
    """torch_xla loads only beside the torch it was built for: the image installs both from the file the trainer
    and scripts/xla_venv.sh read, names no version of its own, and sets the runtime the trainer picks XLA by."""
    tpu = DOCKERFILES[1].read_text()
    pins = "packages/selfplay/data/xla-requirements.txt"
    assert (REPO / pins).is_file() and pins in tpu
    assert "install_torch.sh tpu /tmp/build/xla-requirements.txt" in tpu
    code = "\n".join(line for line in tpu.splitlines() if not line.startswith("#"))
    assert "TORCH_SPEC" not in code and not re.search(r"torch(_xla|-xla)?==", tpu)
    assert "PJRT_DEVICE=TPU" in tpu and "GANTRY_IMAGE_FLAVOUR=tpu" in tpu and "install_torch.sh tpu" in tpu
    install = (REPO / "docker" / "install_torch.sh").read_text()
    assert 'set -- -r "$spec" "torch-xla[tpu]"' in install  # libtpu, the TPU runtime of the pinned release
    assert "import torch_xla" in install  # a mismatched pair fails the build, not the first run on a TPU


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_shell_scripts_pass_shellcheck(script):
    result = subprocess.run([tool("shellcheck"), str(script)], check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_has_cpu_and_gpu_profiles():
    compose = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())
    cpu, gpu = compose["services"]["trainer-cpu"], compose["services"]["trainer-gpu"]
    assert cpu["profiles"] == ["cpu"] and gpu["profiles"] == ["gpu"]
    assert cpu["build"]["dockerfile"] == gpu["build"]["dockerfile"] == "docker/Dockerfile"
    assert "FLAVOUR" not in cpu["build"]["args"] and gpu["build"]["args"]["FLAVOUR"] == "cuda"
    for service in (cpu, gpu):
        assert service["ipc"] == "host" and service["init"] is True
        assert any(v.endswith(":/runs") for v in service["volumes"])
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert "deploy" not in cpu


def test_compose_file_is_valid_for_docker_compose(tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.skip("docker-compose is not installed (scripts/ci-setup.d/20-docker.sh installs it)")
    for profile in ("cpu", "gpu"):
        result = subprocess.run([compose, "-f", str(REPO / "docker" / "compose.yaml"), "--profile", profile, "config"],
                                check=False, capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert f"trainer-{profile}" in result.stdout


def test_dockerignore_keeps_the_context_small():
    ignored = {line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()}
    assert {".git", ".venv", ".venv-*", "runs", "**/.terraform", "**/__pycache__", "packages/gantry"} <= ignored


def test_devcontainer_json_builds_on_the_trainer_image_and_suits_this_engine():
    """What CI's engine and GPU-less hosts need; the CLI reads JSON with comments (here: whole lines)."""
    text = (REPO / ".devcontainer" / "devcontainer.json").read_text()
    config = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    assert config["build"]["dockerfile"] == "Dockerfile" and config["build"]["context"] == ".."
    assert "--network=host" in config["build"]["options"] and "--network=host" in config["runArgs"]
    assert config["hostRequirements"] == {"gpu": "optional"}  # the CLI adds --gpus all only where it works
    assert not any("gpus" in arg for arg in config["runArgs"]), "--gpus in runArgs breaks GPU-less hosts"
    assert config["remoteUser"] == "trainer" and config["postCreateCommand"] == "make install-dev"
    dev = DEV_DOCKERFILE.read_text()
    assert "FROM ${TRAINER_IMAGE:-gantry-trainer:cpu}" in dev and "mcr.microsoft.com" not in text + dev
    assert "ENV VENV=/home/trainer/.venv" in dev, "make inside must use the image's venv, not the host's .venv"
