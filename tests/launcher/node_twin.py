"""The node twin: the README's cloud walkthrough against the local cloud (packages/local_cloud), in this process.

``TwinDeployment`` is `make local-cloud` run in the test's deployment folder: local_cloud.cloud.LocalCloud, the same
world a user starts, with its world file written there, so that the CLI the test runs in-process in that folder talks
to it (gantry.local_world) as the user's make targets do. `make apply` then creates its nodes through the real
terraform binary; each boots as a VM does (local_cloud.node) and runs the real agent, image and engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import gcsfs
from checkout import REPO
from gantry.local_world import FOLDER
from local_cloud.cloud import LocalCloud
from local_cloud.node import LocalNode, free_port  # noqa: F401 (free_port: the twin test's)


class TwinDeployment:
    """The local cloud up in ``root`` (the folder the CLI runs in) for the rest of ``stack``; ``names`` and ``read``
    look into its bucket, ``nodes`` and ``vms`` at its nodes once `make apply` created them."""

    def __init__(self, stack, root: Path, nodes: int = 2):
        # gantry's verbs point this process's bucket clients at the world (gantry.cli._in_local_cloud): undone after
        stack.enter_context(mock.patch.dict(os.environ))
        self.cloud = stack.enter_context(LocalCloud(root / FOLDER, nodes))
        stack.callback(gcsfs.GCSFileSystem.clear_instance_cache)
        gcsfs.GCSFileSystem.clear_instance_cache()  # one per arguments, listings cached: not another test's
        self.environ: dict[str, str] = {}  # nothing but the world file: the run's folder is gs://BUCKET/runs/RUN_ID
        self.tmp_path = root
        self.bucket_url = f"gs://{self.cloud.bucket_name}"

    @property
    def outputs(self) -> dict:
        return self.cloud.outputs()

    @property
    def vms(self) -> list[dict]:
        """Each node's Compute record (its status, metadata and guest attributes)."""
        return [vm.record for vm in self.cloud.vms]

    @property
    def nodes(self) -> list[LocalNode]:
        return [vm.node for vm in self.cloud.vms]

    def names(self, folder: str) -> list[str]:
        """The objects under the bucket's ``folder`` (e.g. runs/twin), their names relative to it."""
        return self.cloud.bucket.names(f"{self.bucket_url}/{folder}")

    def read(self, path: str) -> bytes:
        """The object at the bucket's ``path`` (e.g. runs/twin/stats.jsonl); FileNotFoundError where there is none."""
        return self.cloud.bucket.read(f"{self.bucket_url}/{path}")


# ---- the README's cloud walkthrough, as the twin runs it ----------------------------------------------------------

WALKTHROUGH_MARK = "<!-- walkthrough: the node twin runs this block -->"
OWN_PROJECT_MARK = "<!-- own project: the local cloud test runs this block -->"


def make_target_verbs() -> dict[str, str]:
    """Each make target whose recipe runs `-m gantry VERB` -> VERB, read from the Makefile and mk/*.mk."""
    import re

    verbs: dict[str, str] = {}
    for makefile in [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))]:
        target = None
        for line in makefile.read_text().splitlines():
            if (rule := re.match(r"^([a-z][a-z0-9-]*):", line)) is not None:
                target = rule.group(1)
            elif line.startswith("\t") and target and (run := re.search(r"-m gantry (\w+)", line)):
                verbs.setdefault(target, run.group(1))
    return verbs


def readme_make_lines(mark: str = WALKTHROUGH_MARK) -> list[list[str]]:
    """The `make ...` lines of a README block, each as the shell splits it (comments dropped). Lines that are not
    make commands (gcloud, cp) are Google's or the user's own and are skipped."""
    import shlex

    text = (REPO / "README.md").read_text()
    assert mark in text, f"README.md lost its marker {mark!r}"
    block = text.split(mark, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.splitlines() if line.startswith("make ")]


def readme_walkthrough(mark: str = WALKTHROUGH_MARK) -> list[tuple[str, list[str]]]:
    """A README block the twin runs (the cloud walkthrough, or your own project's) as (gantry verb, its ARGS) in the
    README's order: each `make TARGET [PROJECT=DIR] [ARGS=...]` line mapped through the target's recipe (PROJECT=DIR
    is the recipes' --project DIR); a make target that runs no gantry verb fails here, so the README cannot name one
    the twin does not know."""
    import shlex

    verbs = make_target_verbs()
    steps = []
    for words in readme_make_lines(mark):
        target, args = words[1], []
        for word in words[2:]:
            if word.startswith("PROJECT="):
                args = ["--project", word[len("PROJECT="):], *args]
            elif word.startswith("ARGS="):
                args = [*args, *shlex.split(word[len("ARGS="):])]
            elif word.startswith("RUN="):  # make fetch RUN=RUN_ID: the recipe's positional run id
                args = [*args, word[len("RUN="):]]
        assert target in verbs, f"README's block names `make {target}`, which runs no gantry verb"
        steps.append((verbs[target], args))
    return steps
