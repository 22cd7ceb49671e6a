"""docker/torch_pins.py: torch's pins from docker/torch.json, and the laptop install that never pulls CUDA silently.

pip's answers are stood in for here (tests/index asks the real indexes): the dry-run report is the shape pip's
--report writes, with the nvidia-* packages PyPI's Linux torch brings.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from checkout import REPO


@pytest.fixture(scope="module")
def torch_pins():
    spec = importlib.util.spec_from_file_location("torch_pins", REPO / "docker" / "torch_pins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(*names_versions, requires_dist=()):
    """A pip --dry-run --report 'install' list."""
    return [{"metadata": {"name": n, "version": v, **({"requires_dist": list(requires_dist)} if n == "torch" else {})}}
            for n, v in names_versions]


def test_the_pins_file_names_torch_its_cuda_and_both_indexes(torch_pins):
    pins = torch_pins.load()
    assert torch_pins.requirement(pins) == f"torch=={pins['torch']}"
    assert pins["cuda"].count(".") == 1 and all(part.isdigit() for part in pins["cuda"].split("."))
    assert pins["cpu_index_url"].endswith("/whl/cpu") and pins["cuda_index_url"].startswith("https://")


@pytest.mark.parametrize(("lines", "cuda"), [
    (['Requires-Dist: cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"', "Requires-Dist: filelock"],
     "13.0"),
    (['nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"', "nvidia-nccl-cu12==2.27.5"], "12"),
    (["filelock", "sympy>=1.13.3"], None),
])
def test_the_cuda_a_wheel_pulls_in_is_read_from_its_requires_dist(torch_pins, lines, cuda):
    assert torch_pins.cuda_of(lines) == cuda


def test_an_index_out_of_reach_is_a_reason_not_an_exception(torch_pins):
    reason = torch_pins.unreachable("http://127.0.0.1:9/simple", timeout=2)  # port 9: nothing listens
    assert reason and "\n" not in reason


@pytest.fixture
def laptop(torch_pins, monkeypatch):
    """install() with the probe and pip stood in: what it would run is recorded, nothing is installed."""
    calls = []
    monkeypatch.delenv("TORCH_SPEC", raising=False)
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    monkeypatch.delenv("TORCH_ALLOW_CUDA", raising=False)

    class Done:
        returncode = 0

    monkeypatch.setattr(torch_pins, "_pip", lambda python, *args, **kw: calls.append(args) or Done())
    monkeypatch.setattr(torch_pins, "installed_torch", lambda python: None)  # a fresh venv
    return calls


def test_a_venv_that_already_has_the_pinned_cpu_torch_installs_nothing(torch_pins, laptop, monkeypatch, capsys):
    """A dev container's venv sees the image's torch: no index is asked, so none out of reach can refuse it."""
    pins = torch_pins.load()
    monkeypatch.setattr(torch_pins, "installed_torch", lambda python: (f"{pins['torch']}+cpu", ["filelock"]))
    monkeypatch.setattr(torch_pins, "would_install", lambda python, args: pytest.fail("asked pip"))
    assert torch_pins.install("python", []) == 0 and laptop == []
    assert capsys.readouterr().err.strip() == f"torch: {pins['torch']}+cpu (CPU-only) is already installed"


def test_an_installed_cuda_build_or_another_version_is_not_taken_for_the_pin(torch_pins, laptop, monkeypatch):
    pins = torch_pins.load()
    monkeypatch.setattr(torch_pins, "unreachable", lambda url, timeout=10: None)
    monkeypatch.setattr(torch_pins, "would_install", lambda python, args: report(("torch", f"{pins['torch']}+cpu")))
    for have in [(pins["torch"], ["cuda-toolkit[cudart]==13.0.3"]), ("2.3.0+cpu", [])]:
        monkeypatch.setattr(torch_pins, "installed_torch", lambda python, have=have: have)
        laptop.clear()
        assert torch_pins.install("python", []) == 0 and laptop and laptop[-1][0] == "install"


def test_installed_torch_reads_this_venvs_torch_without_importing_it(torch_pins):
    import sys

    import torch

    version, _requires = torch_pins.installed_torch(sys.executable)
    assert version == torch.__version__


def test_a_linux_laptop_that_reaches_only_pypis_cuda_build_is_told_in_one_line(torch_pins, laptop, monkeypatch,
                                                                                capsys):
    pins = torch_pins.load()
    monkeypatch.setattr(torch_pins, "unreachable", lambda url, timeout=10: "Connection refused")
    monkeypatch.setattr(torch_pins, "would_install", lambda python, args: report(
        ("torch", pins["torch"]), ("nvidia-cudnn-cu13", "9"), ("cuda-toolkit", "13.0.3"),
        requires_dist=["cuda-toolkit[cudart]==13.0.3"]))
    assert torch_pins.install("python", []) == 1
    assert laptop == []  # nothing installed
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("torch: error: ")
    assert "CUDA 13.0 build" in err[0] and "Connection refused" in err[0] and "nvidia-cudnn-cu13" in err[0]
    assert f"torch-{pins['torch']}+cpu" in err[0] and f"TORCH_SPEC=torch=={pins['torch']}" in err[0]


def test_without_the_cpu_index_a_local_cpu_wheel_is_taken_with_one_line(torch_pins, laptop, monkeypatch, capsys):
    monkeypatch.setattr(torch_pins, "unreachable", lambda url, timeout=10: "Connection refused")
    monkeypatch.setattr(torch_pins, "would_install", lambda python, args: report(("torch", "2.13.0+cpu")))
    assert torch_pins.install("python", []) == 0
    assert laptop == [("install", "-q", torch_pins.requirement())]  # pip's own find-links and index
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot be reached (Connection refused)" in err[0] and "CPU-only" in err[0]


def test_the_cpu_index_comes_first_when_it_answers(torch_pins, laptop, monkeypatch, capsys):
    pins = torch_pins.load()
    monkeypatch.setattr(torch_pins, "unreachable", lambda url, timeout=10: None)
    monkeypatch.setattr(torch_pins, "would_install", lambda python, args: report(("torch", "2.13.0+cpu")))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert torch_pins.install("python", []) == 0
    assert laptop == [("install", "-q", "--index-url", pins["cpu_index_url"], "--extra-index-url",
                       pins["cuda_index_url"], torch_pins.requirement(pins))]
    assert capsys.readouterr().err == ""


def test_torch_spec_is_the_users_choice_installed_as_given(torch_pins, laptop, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_SPEC", "torch==2.13.0")
    monkeypatch.setattr(torch_pins, "would_install", lambda *a: pytest.fail("a deliberate TORCH_SPEC is not second-guessed"))
    assert torch_pins.install("python", []) == 0
    assert laptop == [("install", "-q", "--force-reinstall", "--no-deps", "torch==2.13.0"),
                      ("install", "-q", "torch==2.13.0")]
    assert "as TORCH_SPEC asks" in capsys.readouterr().err


def fake_torch_wheel(folder: Path, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A wheel named torch of ``version`` holding one module: what pip installs and uninstalls as it would torch."""
    import base64
    import hashlib
    import zipfile

    dist = f"torch-{version}.dist-info"
    files = {"torch/__init__.py": f"__version__ = {version!r}\n",
             f"{dist}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: " + version + "\n"
             + "".join(f"Requires-Dist: {r}\n" for r in requires),
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()}"
                     f",{len(text.encode())}\n" for name, text in files.items()) + f"{dist}/RECORD,,\n"
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in {**files, f"{dist}/RECORD": record}.items():
            wheel.writestr(name, text)
    return path


@pytest.mark.timeout(300)
def test_torch_spec_replaces_a_cpu_build_that_already_satisfies_its_version(torch_pins, tmp_path, monkeypatch,
                                                                           capsys):
    """#96: TORCH_SPEC=torch==2.13.0 into a venv holding 2.13.0+cpu: pip alone keeps the CPU build (it satisfies
    ==2.13.0) and the GPU laptop stays on CPU. Real pip, a real venv, two small wheels named torch."""
    import subprocess
    import venv

    cpu, index = tmp_path / "cpu", tmp_path / "index" / "torch"
    cpu.mkdir()
    index.mkdir(parents=True)
    fake_torch_wheel(cpu, "2.13.0+cpu")
    wheel = fake_torch_wheel(index, "2.13.0", requires=('cuda-toolkit==13.0.2; platform_system == "Darwin"',))
    (index / "index.html").write_text(f'<a href="{wheel.name}">{wheel.name}</a>\n')  # a simple index's page
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    for key in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # this machine's find-links hold a real +cpu torch
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(cpu), "torch==2.13.0+cpu"],
                   check=True, capture_output=True, timeout=120)
    monkeypatch.setenv("TORCH_SPEC", "torch==2.13.0")
    monkeypatch.setenv("TORCH_INDEX_URL", (tmp_path / "index").as_uri())
    assert torch_pins.install(python, []) == 0
    assert torch_pins.installed_torch(python)[0] == "2.13.0"  # the spec's build, not the +cpu one it satisfied
    assert "torch: 2.13.0 installed (CUDA 13.0)" in capsys.readouterr().err


def test_an_image_whose_cpu_index_is_out_of_reach_stops_naming_the_fix(torch_pins, monkeypatch):
    monkeypatch.delenv("TORCH_INDEX_URL", raising=False)
    monkeypatch.setattr(torch_pins, "unreachable", lambda url, timeout=10: "Connection refused")
    with pytest.raises(SystemExit) as stop:
        torch_pins.image_index("cpu")
    assert "cannot be reached (Connection refused)" in str(stop.value) and "WHEEL_DIR" in str(stop.value)
    assert torch_pins.image_index("cuda") == torch_pins.load()["cuda_index_url"]  # PyPI: the deliberate choice


def test_the_pins_cli_prints_one_value(torch_pins, capsys):
    assert torch_pins.main(["get", "cuda"]) == 0
    assert capsys.readouterr().out.strip() == json.loads((REPO / "docker" / "torch.json").read_text())["cuda"]
