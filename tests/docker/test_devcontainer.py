"""The dev container (.devcontainer/) with the real Dev Containers CLI and the real engine: `devcontainer
up` on a fresh copy of the repository, then `make test-fast` inside it, as a developer would run it, on the
trainer's own suites (INSIDE): the container is the trainer image plus the dev tools, and what runs in it is
the trainer. The launcher's, infra's and Docker's fast tests ran inside too until 2026-11-28 (310–360 s of
CI's engine worker); inside they drive the same fakes and subprocesses as on the host, whose run of the
whole suite keeps them.

The copy holds the files git would commit (tracked and untracked, not ignored), so what is tested is
this checkout's .devcontainer and code, not the last commit's, and not the host's .venv or runs/.
It starts from the session's CPU image (the cpu_image fixture: built once, with the local wheels)
through GANTRY_TRAINER_IMAGE, so the only build here is the dev layer. Container and images are
removed afterwards, pass or fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from checkout import REPO
from docker_helpers import docker

# A marker, not a check in the test: the session's cpu_image fixture would build the image (minutes)
# before a check inside the test could skip.
pytestmark = [pytest.mark.docker, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("devcontainer") is None,
                                 reason="the Dev Containers CLI is not installed (scripts/ci-setup.d/"
                                        "30-devcontainer-cli.sh installs @devcontainers/cli from npm)")]

DEV_UID = 1000  # the image's `trainer`
INSIDE = "tests/unit tests/integration"  # the trainer's suites (their slow tests excluded by test-fast)
SUMMARY = re.compile(r"^=+ (.*\d+ passed.*) in [\d.]+s.*=+$", re.MULTILINE)


def fresh_copy(target: Path) -> Path:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the working tree is listed too
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    # On Linux the CLI gives the container's user the host user's uid, except for root (as in CI):
    # then the workspace must belong to the container's uid 1000, as a developer's checkout would,
    # since `make install-dev` and pytest write in it (packages/*.egg-info, .pytest_cache).
    if os.geteuid() == 0:
        for path in [target, *target.rglob("*")]:
            os.lchown(path, DEV_UID, DEV_UID)
    return target


def run(*args: str, env: dict, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    result = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    return result, time.monotonic() - start


@pytest.mark.timeout(2400)
def test_dev_container_comes_up_and_runs_the_fast_suite(cpu_image, tmp_path, record_property):
    cli = shutil.which("devcontainer")
    # A unique folder name: the CLI names its images vsc-<folder>-<hash>, so this run's are findable.
    workspace = fresh_copy(tmp_path / f"gantry-devc-{uuid.uuid4().hex[:8]}")
    env = {**os.environ, "GANTRY_TRAINER_IMAGE": cpu_image}
    try:
        # As root the CLI's uid layer would change nothing (uid 0 is taken) yet cost a full image copy
        # on vfs storage: off, unless the test runs as a normal user.
        uid_layer = "off" if os.geteuid() == 0 else "on"
        up, up_s = run(cli, "up", "--workspace-folder", str(workspace), "--update-remote-user-uid-default", uid_layer,
                       env=env, timeout=1200)
        assert up.returncode == 0, f"devcontainer up failed:\n{up.stdout[-3000:]}\n{up.stderr[-6000:]}"
        outcome = json.loads(up.stdout.strip().splitlines()[-1])
        assert outcome["outcome"] == "success" and outcome["remoteUser"] == "trainer", outcome

        fast, fast_s = run(cli, "exec", "--workspace-folder", str(workspace), "make", "test-fast",
                           f"ARGS={INSIDE}", env=env, timeout=1500)
        record_property("devcontainer_up_s", round(up_s))
        record_property("test_fast_inside_s", round(fast_s))
        print(f"devcontainer up {up_s:.0f} s, make test-fast inside {fast_s:.0f} s")
        output = fast.stdout + fast.stderr
        summary = SUMMARY.search(output)
        # The failures' own section, not the output's tail: -ra's skip lines would push it out of sight.
        failures = re.search(r"^=+ (FAILURES|ERRORS) =+$.*?(?=^=+ short test summary)", output, re.M | re.S)
        shown = failures.group(0)[:12000] if failures else output[-8000:]
        assert fast.returncode == 0, f"make test-fast failed inside the dev container:\n{shown}\n{output[-2000:]}"
        assert summary, f"no pytest summary line:\n{output[-4000:]}"
        assert not re.search(r"\d+ (failed|errors?)\b", summary.group(1)), summary.group(0)
        # The container's own venv ran it, never the host's .venv (none is in the copy anyway).
        assert "/home/trainer/.venv/bin/python -m pytest" in output, output[-4000:]
    finally:
        label = f"devcontainer.local_folder={workspace}"
        ids = docker("ps", "-aq", "--filter", f"label={label}", check=False).stdout.split()
        if ids:
            docker("rm", "-f", *ids, check=False, timeout=300)
        # The dev layer and the CLI's uid layer: about 1.5 GB each on vfs storage.
        images = docker("images", "-q", "--filter", f"reference=vsc-{workspace.name}-*", check=False).stdout.split()
        if images:
            docker("rmi", "-f", *sorted(set(images)), check=False, timeout=300)
