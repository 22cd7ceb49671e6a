"""gantry build --project without an engine: what the context sends and leaves out (and says so), the size limit,
which kind a folder is, torch requirements that fight the image's, the generated Dockerfile's layers, and the bad
inputs through the real command line (one line, exit 1, the engine never asked)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from gantry import images, projects
from gantry.errors import GantryError
from gantry.projects import build as project_build
from gantry.projects import context as project_context
from gantry.projects import dockerfile as project_dockerfile
from gantry.projects import pins as project_pins
from launch_contract import PROJECT_ROOT
from launcher_helpers import REPO, isolated_environ, run_module

PINS = images.torch_pins()
TORCH = PINS["torch"]


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


@pytest.fixture
def tree(tmp_path) -> Path:
    return write(tmp_path / "my-trainer", {
        "requirements.txt": "six\n",
        "train.py": "print('hi')\n",
        "pkg/mod.py": "x = 1\n",
        ".dockerignore": "# heavy\ndata\n*.log\n!keep.log\n!models/keep.pt\n",
        ".gitignore": "# local\n\nmodels/\nsecret.txt\n",
        "sub/.gitignore": "*.tmp\n",
        "sub/y.py": "", "sub/x.tmp": "t",
        "data/big.bin": b"\0" * 3000, "a.log": "l", "keep.log": "k",
        "models/m.pt": b"\0" * 2000, "models/keep.pt": "p", "secret.txt": "s",
        ".git/HEAD": "ref: refs/heads/main\n", ".venv/pyvenv.cfg": "home = /usr\n", ".venv/lib/big.so": b"\0" * 500,
        "env/conda-meta/history": "", "pkg/__pycache__/mod.cpython-311.pyc": b"\0" * 10,
        ".devcontainer/devcontainer.json": "{}",
    })


def test_the_context_honours_dockerignore_gitignore_and_leaves_out_git_venvs_and_caches(tree):
    context = project_context.select(tree)
    sent = sorted(p.relative_to(tree).as_posix() for p in context.files)
    assert sent == [".dockerignore", ".gitignore", "keep.log", "models/keep.pt", "pkg/mod.py", "requirements.txt",
                    "sub/.gitignore", "sub/y.py", "train.py"]
    assert project_build.context_files(tree) == context.files  # what gantry.projects hashes into the version
    why = {item.path: item.reason for item in context.left_out}
    assert why["data/"] == ".dockerignore:2"
    assert why[".venv/"] == why["env/"] == "a virtual environment"
    assert why[".git/"] == why["__pycache__/"] == why[".devcontainer/"] == ""
    # single files: one entry per rule, named by the file and line of the rule
    assert {".dockerignore:3", ".gitignore:4", "sub/.gitignore:1", ".gitignore:3"} <= set(why.values())


def test_the_report_is_two_lines_biggest_first(tree):
    first, second = project_context.select(tree).summary()
    assert first.startswith(f"gantry: context of {tree.resolve()}: 9 files, ")
    assert second.startswith("gantry: left out: data/ 3.0 kB (.dockerignore:2), ")
    assert ".venv/ 512 B (a virtual environment)" in second and ".git/ 21 B" in second


def test_a_context_over_the_limit_is_refused_naming_its_largest_folders(tmp_path):
    project = write(tmp_path / "p", {"requirements.txt": "six\n", "assets/a.bin": b"\0" * 40_000,
                                     "weights/w.bin": b"\0" * 20_000, "train.py": "pass\n"})
    context = project_context.select(project)
    context.check_size(1)  # 60 kB is under 1 MB
    with pytest.raises(GantryError) as refused:
        context.check_size(0.05)
    line = refused.value.line()
    assert "is 60.0 kB, over the 0.05 MB limit (largest: assets/ 40.0 kB, weights/ 20.0 kB, train.py" in line
    assert "nothing was sent" in line and ".dockerignore" in line and "--max-context-mb" in line


@pytest.mark.parametrize(("present", "expected"), [
    (("Dockerfile", "pyproject.toml", "requirements.txt"), "Dockerfile"),
    (("pyproject.toml", "requirements.txt"), "pyproject.toml"),
    (("requirements.txt",), "requirements.txt"),
    (("tools-pyproject.toml", "requirements.txt"), "requirements.txt"),  # [tool.ruff] only: not the project's
])
def test_the_kind_is_the_first_of_dockerfile_pyproject_requirements(tmp_path, present, expected):
    write(tmp_path, {name.removeprefix("tools-"): "[tool.ruff]\n" if name.startswith("tools-") else
                     "[project]\nname = 'x'\n" if name == "pyproject.toml" else "" for name in present})
    assert project_dockerfile.kind(tmp_path) == expected


def test_a_folder_with_none_of_the_three_names_them(tmp_path):
    with pytest.raises(GantryError, match="has no Dockerfile, pyproject.toml or requirements.txt"):
        project_dockerfile.kind(write(tmp_path, {"train.py": ""}))


@pytest.mark.parametrize(("flavour", "text", "number", "asked"), [
    ("cpu", "six\ntorch==2.1.0\n", 2, "torch 2.1.0, the cpu image's is"),
    ("cpu", "# comment\nTorch >= 2.0, < 2.5  # old\n", 2, "torch <2.5,>=2.0"),
    ("cpu", f"torch=={TORCH}+cu121\n", 1, f"torch {TORCH}+cu121"),
    ("cpu", "six \\\n  torch\\\n", 1, None),  # a continuation joins to 'six   torch': not a torch requirement
    ("cpu", "numpy\ntorch \\\n   ==2.0.0\n", 2, "torch 2.0.0"),
    ("cpu", "--index-url https://download.pytorch.org/whl/cu118\n", 1, "points at torch's cu118 builds"),
    ("cpu", "--extra-index-url=https://download.pytorch.org/whl/cu124\n", 1, "points at torch's cu124 builds"),
    ("cpu", "-f https://download.pytorch.org/whl/nightly/cu126\n", 1, "points at torch's cu126 builds"),
    ("cpu", "torch @ https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp311-cp311-linux_x86_64.whl\n",
     1, "asks for torch 2.1.0+cu118"),
    ("cuda", f"torch=={TORCH}+cpu\n", 1, f"the cuda image's is {TORCH}"),
    ("cuda", "--extra-index-url https://download.pytorch.org/whl/cpu\n", 1, "points at torch's cpu builds"),
])
def test_a_torch_requirement_that_fights_the_image_is_refused_with_file_and_line(tmp_path, flavour, text, number,
                                                                                   asked):
    write(tmp_path, {"requirements.txt": text})
    if asked is None:
        project_pins.check(tmp_path, "requirements.txt", flavour, PINS)
        return
    with pytest.raises(GantryError) as refused:
        project_pins.check(tmp_path, "requirements.txt", flavour, PINS)
    line = refused.value.line()
    assert line.startswith(f"requirements.txt:{number}: ") and asked in line, line
    assert "(docker/torch.json)" in line and f"pin torch=={TORCH}" in line


@pytest.mark.parametrize(("flavour", "text"), [
    ("cpu", f"torch\ntorch>=2.0\ntorch=={TORCH}\ntorch=={TORCH}+cpu\nnumpy==2.0\n-e .\n./local_pkg\n"),
    ("cpu", "torch==2.1.0; sys_platform == 'darwin'\n--index-url https://download.pytorch.org/whl/cpu\n"),
    ("cuda", f"torch=={TORCH}\n--extra-index-url https://download.pytorch.org/whl/cu{PINS['cuda'].replace('.', '')}\n"),
    ("cuda", "--index-url https://pypi.org/simple\ntorchvision\n"),
])
def test_requirements_that_keep_the_image_torch_pass(tmp_path, flavour, text):
    write(tmp_path, {"requirements.txt": text})
    project_pins.check(tmp_path, "requirements.txt", flavour, PINS)


def test_an_included_file_and_pyproject_are_named_at_their_line(tmp_path):
    write(tmp_path, {"requirements.txt": "six\n-r extra/more.txt\n", "extra/more.txt": "numpy\ntorch<2\n"})
    with pytest.raises(GantryError, match=r"^extra/more\.txt:2: torch<2 asks for torch <2"):
        project_pins.check(tmp_path, "requirements.txt", "cpu", PINS)
    write(tmp_path, {"pyproject.toml": '[project]\nname = "p"\nversion = "1"\ndependencies = [\n  "numpy",\n'
                                       '  "torch==2.1.0",\n]\n'})
    with pytest.raises(GantryError, match=r"^pyproject\.toml:6: torch==2\.1\.0 asks for torch 2\.1\.0"):
        project_pins.check(tmp_path, "pyproject.toml", "cpu", PINS)


def test_the_generated_dockerfile_layers_torch_then_dependencies_then_code():
    text = project_dockerfile.dockerfile("pyproject.toml", has_dependencies=True)
    lines = text.splitlines()
    kit = project_dockerfile.kit_torch_steps()
    assert lines[1:1 + len(kit)] == kit  # docker/Dockerfile's own steps, verbatim: the engine's cache shares them
    assert kit[-1].startswith(project_dockerfile.TORCH_STEP)
    source = iter((REPO / "docker/Dockerfile").read_text().splitlines())
    assert all(line in source for line in kit)  # in the kit's order, comments aside

    def at(prefix: str) -> int:
        return max(n for n, line in enumerate(lines) if line.startswith(prefix))  # the last: the image's own stage
    assert at(project_dockerfile.TORCH_STEP) < at("COPY gantry/deps/") < at(project_dockerfile.DEPS_STEP) < at("FROM ${BASE_IMAGE}") \
        < at(f"WORKDIR {PROJECT_ROOT}") < at(f"COPY --chown=1000:1000 project/ {PROJECT_ROOT}/") \
        < at("RUN cp -r /workspace /tmp/src && PIP_CERT=") < at("USER 1000:1000")
    assert "-c /tmp/deps/torch-constraint.txt" in lines[at(project_dockerfile.DEPS_STEP)]
    assert "/opt/venv/bin/pip install --no-deps /tmp/src" in text and "ENV PATH=/opt/venv/bin:${PATH}" in text and "ENTRYPOINT" not in text
    plain = project_dockerfile.dockerfile("requirements.txt", has_dependencies=False)
    assert project_dockerfile.DEPS_STEP not in plain and "--no-deps" not in plain


def test_the_context_carries_the_kit_inputs_as_the_kit_does_and_never_writes_into_the_project(tree, tmp_path):
    before = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*"))
    context = project_context.select(tree)
    with project_build.build_context(context, "requirements.txt", PINS) as archive, \
            tarfile.open(fileobj=io.BytesIO(archive.read())) as tar:
        names = set(tar.getnames())
        constraint = tar.extractfile("gantry/deps/torch-constraint.txt").read().decode()
        dockerfile = tar.extractfile("gantry/Dockerfile").read().decode()
    assert constraint == f"torch=={TORCH}\n"
    assert dockerfile == project_dockerfile.dockerfile("requirements.txt", True)
    assert {"gantry/deps/project/requirements.txt", "project/train.py", "project/models/keep.pt"} <= names
    assert not any(n.startswith(("project/.venv", "project/.git/", "project/data")) for n in names)
    with images.build_context(REPO, "docker/Dockerfile") as kit, tarfile.open(fileobj=io.BytesIO(kit.read())) as tar:
        kit_inputs = {n for n in tar.getnames() if n == "docker" or n.startswith(project_dockerfile.KIT_INPUTS)}
    assert {n for n in names if n.startswith("docker")} == kit_inputs  # same paths: the torch layer is shared
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*")) == before


def test_the_version_ignores_what_the_context_leaves_out(tree):
    version = projects.version(tree)
    assert version.startswith("c")
    write(tree, {"data/more.bin": "x", ".venv/lib/other.so": "x", ".devcontainer/devcontainer.json": "{ }"})
    assert projects.version(tree) == version
    write(tree, {"train.py": "print('changed')\n"})
    assert projects.version(tree) != version


def test_a_kit_that_installs_another_torch_tags_the_projects_it_writes_a_dockerfile_for_anew(tree, tmp_path):
    kit = tmp_path / "kit"
    for name in (images.DOCKERFILES["cpu"], *project_dockerfile.KIT_RECIPE):
        write(kit, {name: (REPO / name).read_bytes()})
    recipe = project_dockerfile.kit_recipe("requirements.txt")
    assert project_dockerfile.kit_recipe("requirements.txt", kit) == recipe  # the same kit, the same tag
    assert projects.local_ref(tree, "cuda") == f"my-trainer:cuda-{projects.version(tree)}-{recipe}"
    upgraded = json.loads((kit / "docker/torch.json").read_text()) | {"torch": "9.9.9"}
    write(kit, {"docker/torch.json": json.dumps(upgraded)})
    assert project_dockerfile.kit_recipe("requirements.txt", kit) != recipe  # so `gantry run` asks for a build
    write(tree, {"Dockerfile": "FROM python:3.12-slim\n"})  # the project's own: nothing of the kit's inside
    assert projects.local_ref(tree, "cuda") == f"my-trainer:cuda-{projects.version(tree)}"


# ---- the command line: one line each, exit 1, nothing built (the engine is never asked) -----------------------

def gantry_build(tmp_path: Path, *args: str, **extra: str):
    environ = isolated_environ(tmp_path, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", **extra)
    return run_module(["build", "--cpu", "--no-push", *args], REPO, environ)


@pytest.mark.parametrize(("files", "extra", "expected"), [
    (None, (), "gantry: error: no project folder {project}. Pass --project the folder"),
    ({"train.py": ""}, (), "gantry: error: {project} has no Dockerfile, pyproject.toml or requirements.txt"),
    ({"requirements.txt": "six\ntorch==2.1.0\n"}, (),
     "gantry: error: requirements.txt:2: torch==2.1.0 asks for torch 2.1.0, the cpu image's is"),
    ({"requirements.txt": "six\n", "data/x.bin": b"\0" * 5000}, ("--max-context-mb", "0.001"),
     "gantry: error: the build context of {project} is 5.0 kB, over the 0.001 MB limit (largest: data/ 5.0 kB"),
    ({"requirements.txt": "six\n-e .\n"}, (),
     ("gantry: error: requirements.txt:2: -e . installs a folder in editable mode, and the image's dependency layer "
     "holds only the requirement files. Drop the line")),
    ({"requirements.txt": "six\n./libs/mylib\n"}, (), ("gantry: error: requirements.txt:2: ./libs/mylib is a local "
                                                      "path, which the image's dependency layer does not hold")),
    ({"pyproject.toml": "[tool.poetry]\nname = 'x'\n[tool.poetry.dependencies]\nnumpy = '^1.24'\n"}, (),
     ("gantry: error: {project}/pyproject.toml has no [project] table, so its dependencies are not where pip reads "
     "them (Poetry keeps them in [tool.poetry.dependencies]). Add a requirements.txt beside it (gantry then builds "
     "from that; `poetry export -f requirements.txt -o requirements.txt --without-hashes` writes one)")),
    ({"requirements.txt": "six\n"}, ("--dockerfile", "docker/Dockerfile.gpu"),
     "gantry: error: --dockerfile docker/Dockerfile.gpu is not a file in the project {project}. Name the Dockerfile"),
    ({"requirements.txt": "six\n", "../Dockerfile.elsewhere": "FROM python:3.11-slim\n"},
     ("--dockerfile", "../Dockerfile.elsewhere"), ("gantry: error: --dockerfile ../Dockerfile.elsewhere is not a file "
                                                  "in the project {project}.")),
    ({"docker/Dockerfile.pytorch": "FROM pytorch/pytorch:1.11.0-cuda11.3-cudnn8-runtime\nCOPY . /workspace\n"},
     ("--dockerfile", "docker/Dockerfile.pytorch"),
     ("gantry: error: docker/Dockerfile.pytorch builds FROM pytorch/pytorch:1.11.0-cuda11.3-cudnn8-runtime: torch 1.11.0 "
     "a CUDA 11.3 build, and the cpu nodes need the CPU torch. Install torch==2.13.0 on a base of your choice in "
     "docker/Dockerfile.pytorch, or drop the Dockerfile")),
])
def test_bad_projects_are_one_line_and_nothing_is_built(tmp_path, files, extra, expected):
    project = tmp_path / "my-trainer"
    if files is not None:
        write(project, files)
    result = gantry_build(tmp_path, "--project", str(project), *extra)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected.format(project=project.resolve() if files is not None
                                                                   and "context" in expected else project)), lines
    assert "Docker engine" not in result.stderr


@pytest.mark.timeout(120)
def test_requirements_without_a_wheel_for_the_images_python_are_all_named_in_seconds_and_nothing_is_built(tmp_path):
    """The real index answers (PyPI, or the index pip is configured for): grpcio 1.46.3 and h5py 3.7.0 predate
    Python 3.11 and have no cp311 wheel; pip would build them from source for minutes and fail in the image."""
    import time

    project = write(tmp_path / "old-project", {"requirements.txt": "six\ngrpcio==1.46.3\nh5py==3.7.0  # 2022\n",
                                               "poetry.lock": ""})
    began = time.monotonic()
    result = gantry_build(tmp_path, "--project", str(project))
    if "could not reach the package index" in result.stdout:
        pytest.skip("the package index does not answer from here: " + result.stdout.strip().splitlines()[-1])
    assert time.monotonic() - began < 30, "a refusal in seconds, not a build's minutes"
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("gantry: error: 2 of 3 requirement(s) cannot be installed in the image as wheels: "
                           "requirements.txt:2: grpcio==1.46.3 has no wheel for Python 3.11 on linux x86_64 (newest "
                           "that has: "), line
    assert "; requirements.txt:3: h5py==3.7.0 has no wheel for Python 3.11 on linux x86_64 (newest that has: " in line
    assert line.endswith("Pin versions with wheels for Python 3.11 on linux x86_64 (`pip index versions NAME` lists "
                         "them), or ask for the Python they need in .python-version (3.10); nothing was built"), line
    assert "gantry: poetry.lock is not read: the image installs requirements.txt's requirements" in result.stdout
    assert "Docker engine" not in result.stderr and "Step 1/" not in result.stdout

    # as the message says: the project asks for the Python of its pins, and the same index says they resolve there
    (project / ".python-version").write_text("3.10.12\n")
    on_310 = gantry_build(tmp_path, "--project", str(project))
    assert "gantry: all 3 requirement(s) resolve to wheels for Python 3.10 on linux x86_64" in on_310.stdout, \
        on_310.stdout + on_310.stderr
    assert "base python:3.10-slim-bookworm, whose torch layer is its own" in on_310.stdout
    assert on_310.returncode == 1 and "Docker engine" in on_310.stderr  # then the build: no engine in this test
    tags = {projects.local_ref(project, "cpu")}
    (project / ".python-version").write_text("3.11\n")
    assert projects.local_ref(project, "cpu") not in tags  # another Python, another image: never the 3.10 one
    (project / ".python-version").write_text("3.9\n")
    old = gantry_build(tmp_path, "--project", str(project))
    assert old.returncode == 1 and old.stderr.strip().splitlines() == [
        ("gantry: error: .python-version: '3.9' is not a Python the project's image can have. Write one of 3.10, 3.11, "
        "3.12, 3.13 there (or remove the file: 3.11); nothing was built")]


def test_another_python_checks_its_base_first_and_keeps_the_kits_steps_otherwise():
    default = project_dockerfile.dockerfile("requirements.txt", True)
    on_310 = project_dockerfile.dockerfile("requirements.txt", True, python="3.10")
    check = project_dockerfile.python_check("3.10")
    assert check not in default and on_310.replace(check + "\n", "") == default  # one step more, the rest verbatim
    lines = on_310.splitlines()
    assert lines[lines.index(check) - 1] == "FROM ${BASE_IMAGE} AS builder"  # before torch: a wrong base fails first
    assert project_dockerfile.kit_recipe("requirements.txt", python="3.10") != \
        project_dockerfile.kit_recipe("requirements.txt")


def test_requirements_that_resolved_are_not_asked_again_and_a_change_is(tmp_path, monkeypatch):
    """One pip call for a set that resolves, none for the same set again: a code-only rebuild stays in seconds."""
    import subprocess

    from gantry.projects import resolve as project_resolve

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls, said = [], []

    def pip(*args, **kwargs):
        calls.append(args[0])
        return subprocess.run(*args, **kwargs)  # noqa: PLW1510 (check=False is in kwargs, as gantry passes it)

    lines = project_pins.requirement_lines(write(tmp_path / "p", {"requirements.txt": "six\n"}))
    project_resolve.check(lines, PINS, said.append, run=pip)
    if said and "could not reach the package index" in said[-1]:
        pytest.skip("the package index does not answer from here: " + said[-1])
    assert len(calls) == 1 and said == ["gantry: all 1 requirement(s) resolve to wheels for Python 3.11 on linux x86_64"]
    project_resolve.check(lines, PINS, said.append, run=pip)
    assert len(calls) == 1  # remembered
    changed = project_pins.requirement_lines(write(tmp_path / "p", {"requirements.txt": "six==1.16.0\n"}))
    project_resolve.check(changed, PINS, said.append, run=pip)
    assert len(calls) == 2


def test_a_dockerfile_without_a_project_is_refused(tmp_path):
    result = gantry_build(tmp_path, "--dockerfile", "docker/Dockerfile.gpu")
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        ("gantry: error: --dockerfile docker/Dockerfile.gpu names your project's Dockerfile, and no --project is given. "
        "Add --project DIR (make build-train PROJECT=DIR ARGS=\"--dockerfile PATH\"); the kit's image is built from "
        "docker/Dockerfile")], result.stderr


@pytest.mark.parametrize(("files", "words", "expected"), [
    ({"train.py": "", "requirements.txt": "six\n"}, ["--", "python", "train.py"],
     "gantry: error: no Docker engine at unix://"),  # the image is looked for in the engine, which is not there
    ({"train.py": "", "requirements.txt": "six\n"}, ["--", "-m", "train"],
     ("gantry: error: run-local runs a command (python ..., bash ...), and torchrun's `-m MODULE` or SCRIPT.py is "
     "what gantry run starts under torchrun. Give the command itself after --")),
    ({"requirements.txt": "six\n"}, ["--", "python", "train.py"],
     "gantry: error: train.py is not a file in the project {project}."),
    ({"train.py": "", "requirements.txt": "six\n"}, ["--env", "NODE_RANK=1", "--", "python", "train.py"],
     "gantry: error: --env NODE_RANK is set by the agent on every node"),
])
def test_run_local_refuses_in_one_line_what_it_cannot_run(tmp_path, files, words, expected):
    project = write(tmp_path / "my-trainer", files)
    environ = isolated_environ(tmp_path, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    result = run_module(["run-local", "--project", str(project), *words], tmp_path, environ)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(expected.format(project=project)), line


def test_build_help_says_how_to_build_a_project(tmp_path):
    result = run_module(["build", "--help"], REPO, isolated_environ(tmp_path))
    assert result.returncode == 0
    assert "--project DIR" in result.stdout and "gantry build --project ../my-trainer" in result.stdout
    assert "--max-context-mb" in result.stdout


def test_make_build_train_passes_the_project(tmp_path):
    import subprocess

    dry = subprocess.run(["make", "-n", "build-train", "PROJECT=../my-trainer", "VENV=" + str(tmp_path)],
                         capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert "-m gantry build" in dry.stdout and "--project '../my-trainer'" in dry.stdout, dry.stdout + dry.stderr


def test_devcontainer_writes_the_project_image_and_keeps_an_existing_file(tmp_path):
    project = write(tmp_path / "my-trainer", {"requirements.txt": "six\n", "train.py": ""})
    environ = isolated_environ(tmp_path, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock")
    result = run_module(["devcontainer", "--project", str(project), "--cpu", "--no-build"], REPO, environ)
    assert result.returncode == 0, result.stderr
    target = project / ".devcontainer" / "devcontainer.json"
    settings = json.loads(target.read_text().split("\n", 1)[1])
    assert settings["image"] == projects.local_ref(project, "cpu")  # what `gantry build --project` tags next
    assert settings["workspaceFolder"] == PROJECT_ROOT and f"target={PROJECT_ROOT}," in settings["workspaceMount"]
    assert "gantry build --project" in result.stdout
    again = run_module(["devcontainer", "--project", str(project), "--cpu", "--no-build"], REPO, environ)
    assert again.returncode == 1 and again.stderr.strip() == f"gantry: error: {target} exists. Pass --force to replace it"
    forced = run_module(["devcontainer", "--project", str(project), "--cpu", "--no-build", "--force"], REPO, environ)
    assert forced.returncode == 0, forced.stderr


def test_a_project_image_is_pushed_where_gantry_projects_names_it(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from gantry.cli import Environment
    from gantry.flows import publish
    from gantry.status import ExitStatus

    project = write(tmp_path / "my-trainer", {"requirements.txt": "six\n"})
    repository = "us-central1-docker.pkg.dev/demo-project/gantry"
    pushed = {}
    monkeypatch.setattr(publish, "Terraform", lambda *a, **k: SimpleNamespace(
        outputs=lambda: {"image_repository_url": repository}))
    monkeypatch.setattr(publish.registry, "push_auth", lambda host: None)
    monkeypatch.setattr(publish.registry, "push", lambda local, target, tag, auth, say: pushed.update(
        local=local, target=f"{target}:{tag}") or f"{target}@sha256:ab")
    said = io.StringIO()
    assert publish.publish(SimpleNamespace(infra_dir=tmp_path), Environment(stdout=said), "cuda",
                        project=project) == ExitStatus.OK
    assert pushed == {"local": projects.local_ref(project, "cuda"),
                      "target": projects.image_ref(repository, project, "cuda")}
    assert f"`gantry run --project {project} -- COMMAND` runs it" in said.getvalue()


def debian_index(folder: Path, packages: list[str], provides: dict[str, str] | None = None) -> str:
    """A Packages.xz as Debian's archive serves it (stanzas of Package:, Provides: ...), as a file:// URL."""
    import lzma

    stanzas = [f"Package: {name}\nVersion: 1.0-1\nArchitecture: amd64\n"
               + (f"Provides: {provides[name]}\n" if provides and name in provides else "") for name in packages]
    path = folder / "Packages.xz"
    path.write_bytes(lzma.compress("\n".join(stanzas).encode()))
    return path.as_uri()


def test_apt_txt_names_are_asked_of_debians_index_before_anything_is_built(tmp_path):
    """#100: a misspelt package costs a second, named with the index's close names, not a build failing at apt-get;
    every name it holds goes into the image with git and make."""
    from gantry.projects import apt as project_apt

    index = debian_index(tmp_path, ["git", "make", "libgl1", "ffmpeg", "ffmpegfs", "libsndfile1"],
                         provides={"ffmpeg": "avconv"})
    project = write(tmp_path / "audio", {"requirements.txt": "six\n", "train.py": "",
                                         "apt.txt": "# what soundfile needs\nlibsndfile1\nffmpeg  # decoding\n"
                                                    "ffmpg\nlibsndfiel1\n"})
    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache"), project_apt.INDEX_URL_ENV: index}
    result = gantry_build(tmp_path, "--project", str(project), **environ)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        ("gantry: error: not a package of Debian bookworm (main, amd64): apt.txt:4: ffmpg (close: ffmpeg, "
        "ffmpegfs); apt.txt:5: libsndfiel1 (close: libsndfile1). Fix the names "
        "(https://packages.debian.org/bookworm/ finds them); nothing was built.")]
    assert "Step 1/" not in result.stdout

    (project / "apt.txt").write_text("libsndfile1\nffmpeg\navconv\ngit\n")  # a virtual package is a name apt takes
    said: list[str] = []
    packages = project_apt.check(project, said.append, environ)
    assert packages == ("git", "make", "libsndfile1", "ffmpeg", "avconv") and said == []
    step = project_apt.install_step(packages)
    text = project_dockerfile.dockerfile("requirements.txt", True, packages=packages)
    lines = text.splitlines()
    assert step in lines and lines.index(step) > max(n for n, line in enumerate(lines) if line.startswith("FROM"))
    assert lines.index(step) < lines.index(f"WORKDIR {PROJECT_ROOT}")  # before the code: an edit keeps it cached
    assert step.endswith("--no-install-recommends git make libsndfile1 ffmpeg avconv && rm -rf /var/lib/apt/lists/*")

    (project / "apt.txt").write_text("libsndfile1>=1.2\n")
    with pytest.raises(GantryError, match=r"^apt\.txt:1: 'libsndfile1>=1\.2' is not a Debian package name"):
        project_apt.check(project, said.append, environ)
    (project / "apt.txt").write_text("ffmpeg\n")
    unreachable = {"XDG_CACHE_HOME": str(tmp_path / "other"), project_apt.INDEX_URL_ENV: (tmp_path / "no").as_uri()}
    assert project_apt.check(project, said.append, unreachable) == ("git", "make", "ffmpeg")
    assert said == [(f"gantry: Debian's package index ({(tmp_path / 'no').as_uri()}) cannot be reached: apt.txt's "
                    "names are not checked here; apt-get judges them in the build")]


@pytest.mark.parametrize(("files", "python"), [
    ({}, "3.11"),
    ({".python-version": "3.10.12\n"}, "3.10"),
    ({".python-version": "cpython-3.12\n", "runtime.txt": "python-3.10\n"}, "3.12"),  # pyenv's file first
    ({"runtime.txt": "python-3.10\n"}, "3.10"),  # repo2docker's
    ({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.8"\n'}, "3.11"),  # the kit's, allowed
    ({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.9,<3.11"\n'}, "3.10"),
    ({"pyproject.toml": '[project]\nname = "p"\nrequires-python = ">=3.12"\n'}, "3.12"),  # the nearest allowed
])
def test_the_images_python_is_what_the_project_already_says(tmp_path, files, python):
    assert project_pins.image_python(write(tmp_path / "p", files or {"train.py": ""})) == python


@pytest.mark.parametrize(("files", "line"), [
    ({"runtime.txt": "python-2.7\n"}, "runtime.txt: 'python-2.7' is not a Python the project's image can have. "),
    ({"pyproject.toml": '[project]\nname = "p"\nrequires-python = "<3.9"\n'},
     "pyproject.toml: requires-python = '<3.9' allows none of the Pythons the project's image can have (3.10, "),
])
def test_a_python_the_image_cannot_have_is_one_line(tmp_path, files, line):
    with pytest.raises(GantryError) as refused:
        project_pins.image_python(write(tmp_path / "p", files))
    assert refused.value.line().startswith(line) and "nothing was built" in refused.value.line()
