"""`gantry build --project` with the real engine, on the README's example project (examples/chess_selfplay, a copy):
its requirements.txt builds on the kit's torch layer (the session's CPU image made it), its code runs with its
dependency and the CPU torch, and after a one-line edit it rebuilds with the dependency layer from the cache and the
new code inside. The node twin, later on the same engine, builds the example itself from the same layers. A
Dockerfile of the project's own that fails names its step and the log; one without torch is refused after its
build. The edited image is removed after."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkout import REPO
from docker_helpers import docker
from gantry import images
from gantry.errors import GantryError
from gantry.projects import build as project_build
from gantry.projects import dockerfile as project_dockerfile

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "chess_selfplay"
SCRIPT = "scripts/train_multi_gpu.py"
VERSIONS = "import chess, torch; print(chess.__version__, torch.__version__, torch.version.cuda)"


def build(project: Path, base: str, lines: list[str], dockerfile: Path | None = None) -> project_build.Built:
    return project_build.build(project, "cpu", lines.append, build_args={"BASE_IMAGE": base},
                               wheel_dir=images.default_wheel_dir(), ca_certs=images.default_ca_certs(),
                               dockerfile=dockerfile)


def project_of(folder: Path, files: dict[str, str]) -> Path:
    """A small project of the files given, no dependencies unless named."""
    folder.mkdir()
    for name, text in {"requirements.txt": "", **files}.items():
        (folder / name).write_text(text)
    return folder


def run_in(tag: str, *command: str) -> str:
    return docker("run", "--rm", "--network", "none", tag, *command, timeout=300).stdout.strip()


@pytest.mark.timeout(2400)
def test_a_requirements_project_builds_on_the_kit_torch_and_a_code_edit_rebuilds_only_the_code(
        cpu_image, local_base, tmp_path, record_property):
    project = tmp_path / EXAMPLE.name  # its name is the image's: the twin's build of the example reuses these layers
    shutil.copytree(EXAMPLE, project)
    tags = []
    try:
        lines: list[str] = []
        first = build(project, local_base, lines)  # the example's own layers, kept for the node twin
        assert first.torch_reused(), "\n".join(lines[-60:])  # the kit's image (cpu_image) built that layer
        assert len([s for s in first.steps if s.startswith(project_dockerfile.DEPS_STEP)]) == 1, first.steps
        chess_version, torch_version, cuda = run_in(first.tag, "python", "-c", VERSIONS).split()
        assert (torch_version, cuda) == (f"{images.torch_pins()['torch']}+cpu", "None")
        assert run_in(first.tag, "pwd") == "/workspace"
        assert run_in(first.tag, "sh", "-c", "git --version && make --version | head -1").startswith("git version ")
        its_readme_runs_in_its_image(first.tag)

        script = project / SCRIPT
        script.write_text(script.read_text().replace('"""Chess self-play:', '"""Chess self-play (edited):', 1))
        lines = []
        second = build(project, local_base, lines)
        tags.append(second.tag)
        assert second.tag != first.tag  # a new version: a run launched from the first keeps its image
        dependencies = [cached for step, cached in second.steps.items() if step.startswith(project_dockerfile.DEPS_STEP)]
        code = [cached for step, cached in second.steps.items() if step.startswith("COPY --chown=1000:1000 project/")]
        assert dependencies == [True] and code == [False], second.steps
        assert "(edited)" in run_in(second.tag, "head", "-1", SCRIPT)

        # make run-local: the same image here, as one node runs it, writing as this machine's user (not the image's
        # uid 1000), its --sync folder where make fetch puts a cloud run's
        here = subprocess.run([sys.executable, "-m", "gantry", "run-local", "--project", str(project), "--run-id",
                               "local-1", "--sync", "checkpoints", "--env", "HELLO=world", "--", "python", SCRIPT,
                               "--iterations", "1", "--games-per-iter", "1", "--max-plies", "20", "--workers", "1"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
        assert here.returncode == 0, here.stdout + here.stderr
        assert f"Running {second.tag} here as node 0 of 1, as uid {os.getuid()}; nothing bills" in here.stdout
        written = list((tmp_path / "runs" / "local-1" / "sync" / "checkpoints").iterdir())
        assert {p.name for p in written} >= {"model_1.pt", "training_stats.json"}, here.stdout
        assert {(p.stat().st_uid, p.stat().st_gid) for p in written} == {(os.getuid(), os.getgid())}
        devcontainer_writes_as_you(project, tmp_path)
        record_property("project_first_build_s", round(first.seconds))
        record_property("project_rebuild_s", round(second.seconds))
        print(f"project image: first build {first.seconds:.0f} s (torch layer from the kit's image; chess "
              f"{chess_version}), rebuild after a one-line edit {second.seconds:.0f} s")
    finally:
        if tags:
            docker("rmi", "-f", *tags, check=False, timeout=300)


def its_readme_runs_in_its_image(tag: str) -> None:
    """The example README's "Run it on your machine" block, as that README shows it, in the project's image (a
    machine with its requirements.txt installed): it installs nothing new and trains, printing the lines the README
    shows, numbers aside."""
    # tests/unit/shown_commands.py: the shown-commands layer reads the README the same way
    from shown_commands import doc_commands

    readme = EXAMPLE / "README.md"
    block = [s.command for s in doc_commands(readme) if s.program in ("pip", "python")]
    assert block == ["pip install -r requirements.txt", "python scripts/train_multi_gpu.py --gpus cpu --iterations 3"]
    printed = run_in(tag, "sh", "-c", " && ".join(block)).splitlines()
    sample = readme.read_text().split("It prints one line per iteration:", 1)[1].split("```\n", 2)[1].splitlines()

    def shape(line: str) -> str:
        return re.sub(r"\d+(\.\d+)?", "N", line)

    ours = [line for line in printed if line.startswith(("self-play on", "iteration "))]
    assert [shape(line) for line in ours] == [shape(line) for line in sample], "\n".join(printed)


def devcontainer_writes_as_you(project: Path, tmp_path: Path) -> None:
    """`make devcontainer PROJECT=...` then the real Dev Containers CLI: the project's image (no second build), the
    folder writable inside as the host user, git and make there (#100). The container is removed after."""
    cli = shutil.which("devcontainer")
    if cli is None:
        print("devcontainer: the Dev Containers CLI is not installed (scripts/ci-setup.d/30-devcontainer-cli.sh)")
        return
    written = subprocess.run([sys.executable, "-m", "gantry", "devcontainer", "--project", str(project), "--cpu"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert written.returncode == 0 and "building it" not in written.stdout, written.stdout + written.stderr
    try:
        up = subprocess.run([cli, "up", "--workspace-folder", str(project)], capture_output=True, text=True,
                            timeout=600, check=False)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        inside = subprocess.run([cli, "exec", "--workspace-folder", str(project), "sh", "-c",
                                 "touch written-inside && git --version && make --version | head -1 && pwd"],
                                capture_output=True, text=True, timeout=300, check=False)
        assert inside.returncode == 0, inside.stdout + inside.stderr
        assert "git version" in inside.stdout and "GNU Make" in inside.stdout and "/workspace" in inside.stdout
        made = project / "written-inside"
        assert made.is_file() and made.stat().st_uid == os.getuid()  # the host user's file, as if written here
        made.unlink()
    finally:
        ids = docker("ps", "-aq", "--filter", f"label=devcontainer.local_folder={project}", check=False).stdout.split()
        if ids:
            docker("rm", "-f", *ids, check=False, timeout=300)
        shutil.rmtree(project / ".devcontainer", ignore_errors=True)


@pytest.mark.timeout(600)
def test_a_projects_own_dockerfile_failing_or_without_torch_is_one_line(docker_client, local_base, tmp_path):
    project = tmp_path / "own"
    project.mkdir()
    (project / "Dockerfile").write_text(f"FROM {local_base}\nRUN echo about to fail && false\n")
    lines: list[str] = []
    with pytest.raises(images.ImageBuildError) as failed:
        build(project, local_base, lines)
    line = failed.value.line()
    log = Path(re.search(r"The full build log is (\S+)$", line).group(1))
    assert log.parent == project_build.log_path(project, "cpu").parent
    assert "failed at step 2/2 (RUN echo about to fail && false): about to fail" in line
    assert "about to fail" in log.read_text()

    # pip's way of failing: its ERROR line in colour, more lines after it, a colour reset last (once the whole line)
    pip_like = (r"printf 'Collecting grpcio==1.46.3\n\033[31mERROR: No matching distribution found for grpcio\033[0m\n"
                r"hint: see above\n\033[0m\n' && false")
    (project / "Dockerfile").write_text(f"FROM {local_base}\nRUN {pip_like}\n")
    time.sleep(1.1)  # a log a second: a build of its own
    with pytest.raises(images.ImageBuildError) as failed:
        build(project, local_base, lines)
    assert ": ERROR: No matching distribution found for grpcio. The full build log is" in failed.value.line()
    assert "\x1b" not in failed.value.line()
    assert log.is_file() and "about to fail" in log.read_text()  # the first failure's log is still there

    # a line the engine cannot parse: its own words, not docker-py's request URL
    (project / "Dockerfile").write_text(f"FROM {local_base}\nRUNN echo hi\n")
    with pytest.raises(images.ImageBuildError) as failed:
        build(project, local_base, lines)
    line = failed.value.line()  # the engine's words: "dockerfile parse error line 2: unknown instruction: RUNN"
    assert line.startswith("Dockerfile cannot be built: dockerfile parse error") and "RUNN" in line, line
    assert line.endswith(". Fix that line of it; nothing was built") and "http+docker" not in line

    # no torch, maybe not even `python`; the label makes an image of its own, so removing it leaves the base alone;
    # the Dockerfile at a path of its own (--dockerfile), which takes no BASE_IMAGE and says so before the build
    (project / "Dockerfile").unlink()
    (project / "docker").mkdir()
    (project / "docker" / "Dockerfile.cpu").write_text(f"FROM {local_base}\nLABEL gantry.test=no-torch\n")
    built_tag = None
    try:
        lines.clear()
        with pytest.raises(GantryError) as refused:
            build(project, local_base, lines, dockerfile=Path("docker/Dockerfile.cpu"))
        built_tag = refused.value.line().split()[0]
        assert (f"gantry: BASE_IMAGE={local_base} is not used: docker/Dockerfile.cpu declares no ARG BASE_IMAGE, so "
                f"its own FROM {local_base} is the base") in lines
        assert any(line.startswith("Step 2/2 : LABEL gantry.test=no-torch") for line in lines)
        assert ("has no torch its python can import" in refused.value.line()
                or "has no `python` to run" in refused.value.line()), refused.value.line()
    finally:
        if built_tag:
            docker("rmi", "-f", built_tag, check=False)


@pytest.mark.timeout(600)
def test_a_base_without_the_python_the_project_asks_for_stops_the_build_at_its_first_step(docker_client, local_base,
                                                                                         tmp_path):
    """#100: .python-version 3.10 on a base that has 3.11 (BASE_IMAGE given, as for a mirror) fails in seconds, before
    torch is installed, in one line naming both; python:3.10-slim-bookworm, the default then, is on Docker Hub,
    which this machine cannot reach."""
    project = project_of(tmp_path / "py310", {"train.py": "", ".python-version": "3.10\n"})
    lines: list[str] = []
    began = time.monotonic()
    with pytest.raises(images.ImageBuildError) as failed:
        build(project, local_base, lines)
    assert "error: BASE_IMAGE has Python 3.11, .python-version asks for 3.10" in failed.value.line(), lines[-20:]
    assert "failed at step 3/" in failed.value.line() and time.monotonic() - began < 120
    assert not any("install_torch.sh" in line for line in lines if line.startswith("Step "))

    # without --base-image the base is Docker Hub's python:3.10-slim-bookworm: had, or pulled, or named as the fix
    lines.clear()
    try:
        project_build.build(project, "cpu", lines.append, wheel_dir=images.default_wheel_dir())
    except images.ImageBuildError:
        pytest.skip("Docker Hub answered: python:3.10-slim-bookworm was pulled, and the build went on")
    except GantryError as refused:
        assert refused.line().startswith("the base python:3.10-slim-bookworm, for the project's Python 3.10, cannot be "
                                         "pulled here ("), refused.line()
        assert "make build-train BASE_IMAGE=REGISTRY/python:3.10-slim-bookworm (gantry build --base-image)" in \
            refused.line()
        assert "http+docker" not in refused.line()  # the engine's words, not the SDK's request
        print(refused.line())
        assert not any(line.startswith("Step ") for line in lines)


@pytest.mark.timeout(900)
def test_a_project_with_an_apt_txt_builds_and_its_command_finds_the_package(cpu_image, local_base, tmp_path):
    """#100: apt.txt's packages, asked of Debian's index first (or said unchecked where it does not answer), in the
    image's apt layer with git and make; the project's command runs them."""
    project = project_of(tmp_path / "with-apt", {"apt.txt": "# a JSON tool the project's scripts call\njq\n",
                                                  "train.sh": "echo '{\"step\": 3}' | jq .step\n"})
    lines: list[str] = []
    built = build(project, local_base, lines)
    try:
        assert built.torch_reused(), "\n".join(lines[-40:])
        assert run_in(built.tag, "sh", "train.sh") == "3"
        assert any(step.startswith("RUN apt-get update") and step.rstrip().endswith(
            "git make jq && rm -rf /var/lib/apt/lists/*") for step in built.steps), built.steps
    finally:
        docker("rmi", "-f", built.tag, check=False, timeout=300)
