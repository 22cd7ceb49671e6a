"""The CUDA image as `make build-train GPU=1` builds it, checked where it is built: PyPI's torch of docker/torch.json's
version and CUDA inside, nothing but the NVIDIA wheels torch asks for, and on a host without a GPU one line and a
non-zero exit from the entry point and from `run.device=cuda`.

CI does not build it: the image is 5.4 GB (2.7 GB of nvidia-* wheels, 1.1 GB torch, 0.7 GB triton), downloaded from
PyPI at every CI run, for 4.5 minutes at best (vfs storage, where each layer is a full copy: 12 GB more on disk);
that is a fifth of CI's budget for an image whose every step but torch's the CPU image already proves. So these tests run
where the image exists (`make test-cuda-image` builds it first: run it before landing a change to docker/) and skip
elsewhere, saying so."""

from __future__ import annotations

import pytest
from docker_helpers import docker
from gantry import images

pytestmark = [pytest.mark.docker]

TAG = images.local_tag("cuda")


@pytest.fixture(scope="module")
def cuda_image(docker_client):
    if docker("image", "inspect", TAG, check=False).returncode != 0:
        pytest.skip(f"no {TAG} here: `make test-cuda-image` builds it (CI does not: see this module's docstring)")
    return TAG


def test_the_cuda_image_holds_torch_json_s_torch_and_cuda(cuda_image):
    pins = images.torch_pins()
    probe = "import torch; print(torch.__version__, torch.version.cuda)"
    found = docker("run", "--rm", "--network", "none", "--entrypoint", "python", cuda_image, "-c", probe).stdout.split()
    assert found == [f"{pins['torch']}+cu{pins['cuda'].replace('.', '')}", pins["cuda"]], found


def test_on_a_host_without_a_gpu_the_cuda_image_says_so_in_one_line_and_fails(cuda_image):
    started = docker("run", "--rm", "--network", "none", cuda_image, check=False)
    assert started.returncode != 0
    lines = [line for line in (started.stderr + started.stdout).splitlines() if line.strip()]
    assert len(lines) == 1 and "no NVIDIA driver is visible in the container" in lines[0], lines
    asked = docker("run", "--rm", "--network", "none", "-e", "GANTRY_REQUIRE_CUDA=0", cuda_image, "train",
                   "--config", "tictactoe", "--run.device=cuda", check=False)
    assert asked.returncode != 0 and "selfplay: error: run.device=cuda but CUDA cannot run a kernel here" in asked.stderr
