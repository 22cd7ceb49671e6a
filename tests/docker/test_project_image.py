"""`gantry build --project` with the real engine: a tiny project of one requirements.txt builds on the kit's torch
layer (the session's CPU image made it), runs its code with its dependency and the CPU torch, and after a one-line
edit rebuilds with the dependency layer from the cache and the new code inside. A Dockerfile of the project's own
that fails names its step and the log; one without torch is refused after its build. Images are removed after."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from docker_helpers import docker
from gantry import images, project_build
from gantry.errors import GantryError

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CODE = 'import six, torch\nprint("{mark}", six.__version__, torch.__version__, torch.version.cuda)\n'


def build(project: Path, base: str, lines: list[str]) -> project_build.Built:
    return project_build.build(project, "cpu", lines.append, build_args={"BASE_IMAGE": base},
                               wheel_dir=images.default_wheel_dir(), ca_certs=images.default_ca_certs())


def run_code(tag: str) -> str:
    return docker("run", "--rm", "--network", "none", tag, "python", "main.py", timeout=300).stdout.strip()


@pytest.mark.timeout(2400)
def test_a_requirements_project_builds_on_the_kit_torch_and_a_code_edit_rebuilds_only_the_code(
        cpu_image, local_base, tmp_path, record_property):
    project = tmp_path / "tiny-trainer"
    project.mkdir()
    # six: small, pure Python; the comment makes this run's dependency layer its own, so the first build's time is
    # that of a first build (torch aside), not of an earlier session's cached layer
    (project / "requirements.txt").write_text(f"six==1.17.0\n# test run {uuid.uuid4().hex}\n")
    (project / "main.py").write_text(CODE.format(mark="first"))
    tags = []
    try:
        lines: list[str] = []
        first = build(project, local_base, lines)
        tags.append(first.tag)
        assert first.torch_reused(), "\n".join(lines[-60:])  # the kit's image (cpu_image) built that layer
        assert [c for s, c in first.steps.items() if s.startswith(project_build.DEPS_STEP)] == [False]
        assert run_code(first.tag) == f"first 1.17.0 {images.torch_pins()['torch']}+cpu None"

        (project / "main.py").write_text(CODE.format(mark="second"))
        lines = []
        second = build(project, local_base, lines)
        tags.append(second.tag)
        assert second.tag != first.tag  # a new version: a run launched from the first keeps its image
        dependencies = [cached for step, cached in second.steps.items() if step.startswith(project_build.DEPS_STEP)]
        code = [cached for step, cached in second.steps.items() if step.startswith("COPY --chown=1000:1000 project/")]
        assert dependencies == [True] and code == [False], second.steps
        assert run_code(second.tag).startswith("second 1.17.0 ")
        record_property("project_first_build_s", round(first.seconds))
        record_property("project_rebuild_s", round(second.seconds))
        print(f"project image: first build {first.seconds:.0f} s (torch layer from the kit's image), rebuild after a "
              f"one-line edit {second.seconds:.0f} s")
    finally:
        if tags:
            docker("rmi", "-f", *tags, check=False, timeout=300)


@pytest.mark.timeout(600)
def test_a_projects_own_dockerfile_failing_or_without_torch_is_one_line(docker_client, local_base, tmp_path):
    project = tmp_path / "own"
    project.mkdir()
    (project / "Dockerfile").write_text(f"FROM {local_base}\nRUN echo about to fail && false\n")
    lines: list[str] = []
    with pytest.raises(images.ImageBuildError) as failed:
        build(project, local_base, lines)
    line = failed.value.line()
    log = project_build.log_path(project, "cpu")
    assert "failed at step 2/2 (RUN echo about to fail && false)" in line and f"The full build log is {log}" in line
    assert "about to fail" in log.read_text()

    # no torch, maybe not even `python`; the label makes an image of its own, so removing it leaves the base alone
    (project / "Dockerfile").write_text(f"FROM {local_base}\nLABEL gantry.test=no-torch\n")
    built_tag = None
    try:
        with pytest.raises(GantryError) as refused:
            build(project, local_base, lines)
        built_tag = refused.value.line().split()[0]
        assert ("has no torch its python can import" in refused.value.line()
                or "has no `python` to run" in refused.value.line()), refused.value.line()
    finally:
        if built_tag:
            docker("rmi", "-f", built_tag, check=False)
