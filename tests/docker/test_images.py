"""gantry.images without an engine: which Dockerfile use_gpu and use_tpu pick, which wheels and certificates go into
the build context, what the context leaves out, and the one-line error when no engine answers."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
from checkout import REPO
from docker_helpers import docker
from gantry import images
from gantry.errors import ConfigError

# use_gpu is read from tfvars through the terraform binary: skip, not fail, where there is none (the dev container)
needs_terraform = pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform binary not on PATH (CI installs it)")



def test_the_image_defaults_to_cpu_without_tfvars(tmp_path):
    assert images.flavour_from_tfvars(tmp_path / "terraform.tfvars") == "cpu"


TPU = 'use_tpu = true\ntpu_type = "v3-8"\nzone = "us-central1-a"\nmax_run_hours = 8\n'


@pytest.mark.parametrize(("text", "expected"), [
    ('project_id = "my-project"\nuse_gpu = true  # T4 nodes\n', "cuda"),
    ('project_id = "my-project"\nuse_gpu = false\n', "cpu"),
    ('project_id = "my-project"\n# use_gpu = true\n', "cpu"),
    ('project_id = "my-project"\n' + TPU, "tpu"),
])
@pytest.mark.terraform
@needs_terraform
def test_the_image_flavour_is_read_from_tfvars(tmp_path, text, expected):
    tfvars = tmp_path / "terraform.tfvars"
    tfvars.write_text(text)
    flavour = images.flavour_from_tfvars(tfvars, REPO / "infra")
    assert flavour == expected and (REPO / images.DOCKERFILES[flavour]).is_file()
    assert images.local_tag(flavour) == f"gantry-trainer:{expected}"


@pytest.mark.terraform
@needs_terraform
def test_use_gpu_must_be_a_boolean(tmp_path):
    tfvars = tmp_path / "terraform.tfvars"
    tfvars.write_text('project_id = "my-project"\nuse_gpu = "yes"\n')
    with pytest.raises(ConfigError) as info:
        images.flavour_from_tfvars(tfvars, REPO / "infra")
    assert 'use_gpu = "yes". use_gpu: a bool is required' in info.value.line()


def test_each_flavour_keeps_the_other_flavours_torch_out(tmp_path):
    """Names built from docker/torch.json: the CUDA image takes PyPI's own wheel (the pinned CUDA) or +cuMAJORMINOR
    of the pinned CUDA, never another CUDA (a +cu128 wheel where the nodes require 13.0); CPU and TPU take +cpu."""
    pins = images.torch_pins()
    torch, cu = pins["torch"], "cu" + pins["cuda"].replace(".", "")
    names = {"cpu": f"torch-{torch}+cpu-cp311-cp311-linux_x86_64.whl",
             "pinned_cuda": f"torch-{torch}+{cu}-cp311-cp311-linux_x86_64.whl",
             "pypi": f"torch-{torch}-cp311-cp311-manylinux_2_28_x86_64.whl",
             "other_cuda": f"torch-{torch}+cu118-cp311-cp311-linux_x86_64.whl",
             "numpy": "numpy-2.0-cp311-cp311-linux_x86_64.whl"}
    for name in names.values():
        (tmp_path / name).write_bytes(b"")
    cpu = [w.name for w in images.select_wheels(tmp_path, "cpu")]
    gpu = [w.name for w in images.select_wheels(tmp_path, "cuda")]
    assert cpu == sorted([names["numpy"], names["cpu"]])
    assert gpu == sorted([names["numpy"], names["pinned_cuda"], names["pypi"]])
    assert images.select_wheels(tmp_path, "tpu") == [tmp_path / n for n in cpu]  # a TPU VM has no use for CUDA
    assert images.select_wheels(None, "cpu") == []
    with pytest.raises(images.ImageBuildError, match="not found"):
        images.select_wheels(tmp_path / "missing", "cpu")


def test_wheel_dir_follows_gantry_wheel_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GANTRY_WHEEL_DIR", str(tmp_path))
    assert images.default_wheel_dir() == tmp_path


def test_context_is_the_repo_minus_dockerignore_plus_wheels_and_certificates(tmp_path):
    wheel = tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"not really a wheel")
    cert = tmp_path / "proxy-ca.crt"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    with images.build_context(REPO, "docker/Dockerfile", [wheel], [cert]) as context, \
            tarfile.open(fileobj=io.BytesIO(context.read())) as tar:
        names = set(tar.getnames())
    assert {"docker/Dockerfile", "docker/entrypoint.sh", "pyproject.toml", "packages/selfplay/train.py",
            "packages/toytrain/train.py"} <= names
    assert f"docker/wheels/{wheel.name}" in names and "docker/certs/extra-0-proxy-ca.crt" in names
    # the launch contract the programs in the image import, and none of the launcher
    assert "packages/launch_contract.py" in names
    launcher = {n for n in names if n.startswith("packages/gantry/")}
    assert launcher == set(), sorted(launcher)
    leaked = [n for n in names if n.startswith((".venv", ".git/", "runs/", "infra/", "tests/")) or "__pycache__" in n]
    assert not leaked, leaked[:10]


def test_missing_certificate_is_named(tmp_path):
    """`gantry build --ca-cert PATH` (docs/DOCKER.md) with no file there: one line naming it, before any build."""
    result = subprocess.run([sys.executable, "-m", "gantry", "build", "--cpu", "--no-push", "--ca-cert",
                             str(tmp_path / "nope.crt")], check=False, capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [(f"gantry: error: CA certificate {tmp_path / 'nope.crt'} not found. "
                                                  "Pass --ca-cert a PEM file.")]
    assert "building" not in result.stdout  # refused before the build is announced
    with pytest.raises(images.ImageBuildError, match="nope.crt"):
        images.build_context(REPO, "docker/Dockerfile", [], [tmp_path / "nope.crt"])


def test_no_engine_is_one_line_with_the_fix(tmp_path):
    """A real `gantry build` (make build-train) against a socket nobody listens on."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/docker.sock"}
    result = subprocess.run([sys.executable, "-m", "gantry", "build", "--cpu", "--no-wheels"],
                            check=False, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gantry: error: no Docker engine at unix://{tmp_path}/docker.sock")
    assert "sudo systemctl start docker" in lines[0] and "Docker Desktop" in lines[0]


def test_failures_name_the_next_step():
    assert "make docker-base" in images.fix_for('Get "https://registry-1.docker.io/v2/": dial tcp: no such host')
    assert "--ca-cert" in images.fix_for("SSL: CERTIFICATE_VERIFY_FAILED certificate verify failed")
    assert "failing step" in images.fix_for("The command '/bin/sh -c ...' returned a non-zero code: 1")


@pytest.mark.docker
def test_unpullable_base_image_fails_with_the_offline_recipe(docker_client):
    """A real build against the engine whose base image no registry serves."""
    lines = []
    with pytest.raises(images.ImageBuildError) as failure:
        images.build_image("cpu", "gantry-trainer:never", {"BASE_IMAGE": "registry.invalid/none:1"}, lines.append)
    assert "building gantry-trainer:never from docker/Dockerfile failed" in failure.value.line()
    assert "make docker-base" in failure.value.line()
    assert lines[0].startswith("gantry: building gantry-trainer:never from docker/Dockerfile")


def test_train_docker_trains_into_a_folder_of_its_own_not_train_locals():
    planned = subprocess.run(["make", "-n", "--no-print-directory", "train-docker", "TRAIN_CONFIG=tictactoe"],
                             check=True, capture_output=True, text=True, cwd=REPO, timeout=120).stdout
    assert '-v "' + str(REPO) + '/runs:/runs" ' + "gantry-trainer:cpu --config 'tictactoe' '--run.dir=runs/docker-tictactoe'" in planned


def test_train_docker_before_build_train_says_build_first():
    """Not a pull from Docker Hub of an image nobody published: the fix, in one line."""
    result = subprocess.run(["make", "-s", "--no-print-directory", "train-docker", "TRAIN_IMAGE=gantry-trainer:never-built"],
                            check=False, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == ("gantry: error: no local image gantry-trainer:never-built. "
                                             "Build it first: make build-train GPU=0 ARGS=--no-push (the CPU image, whatever use_gpu says).")


def test_the_agents_live_watch_sees_a_progress_bar_that_docker_logs_holds_back(local_base, containers):
    """A tqdm-style bar redraws one line with \\r and never ends it: Docker's log driver keeps it until a newline
    (`docker logs` shows nothing of it), while the agent's watch through `docker attach` has its newest drawing."""
    import threading
    import time

    from gantry_agent.containers import Docker
    from gantry_agent.outputs import RunOutputs
    from launch_contract import RunSpec

    bar = 'sleep 2; i=0; while [ $i -lt 400 ]; do printf "\\rplayed %d games" $i; i=$((i+1)); sleep 0.1; done'
    name = containers(local_base, "sh", "-c", bar)
    spec = RunSpec(run_id="live", image=local_base, node_rank=0, nnodes=1, master_addr="127.0.0.1", command=True,
                   args=("sh",))
    outputs = RunOutputs(spec, "/nonexistent", None, None, "", print)
    threading.Thread(target=outputs.watch_live, args=(Docker(["docker"]).attach(name),), daemon=True).start()
    deadline = time.monotonic() + 60
    while not outputs.last_line.startswith("played ") or int(outputs.last_line.split()[1]) < 5:
        assert time.monotonic() < deadline, f"no live line; last {outputs.last_line!r}"
        time.sleep(0.2)
    assert outputs.last_line.endswith(" games")
    assert docker("logs", name).stdout == ""  # what `docker logs` (and so the serial port) has of it meanwhile
