"""Suite-wide: which tests share an xdist worker (`make test` runs pytest-xdist with `--dist loadgroup`).

Tests that build on one expensive session fixture run on one worker, in collection order, so it is made once:
the Docker engine's tests share the CPU image (tests/docker/conftest.py) and the layer cache that the node twin's
`gantry build` reuses; the XLA tests share their venv; the stand-in provider's tests share its mirror, init and plan.
The bench tests share bench/results and runs/ of the checkout: each tells its result from the files that were there
before, which another bench finishing beside it would spoil (it did: two of them read each other's JSON).
Everything else is spread over the workers test by test.

The groups are decided here, by path, in xdist's scheduler. (xdist's own `xdist_group` marker does not group under
pytest 9.2 with xdist 3.8: the workers report the test ids without the group suffix the scheduler splits on.)
"""

from __future__ import annotations

import os

import pytest
from gantry.local_world import FOLDER_ENV
from local_cloud.storage import GCSFS_LAYOUT_ENV

# The shown-commands layer's end-of-suite verdict: every test named as a doc command's proof ran (tests/shown_proof.py).
pytest_plugins = ["shown_proof"]

# `make test ARGS="-k x"` hands its command line to every make below it (MAKEFLAGS, and each variable exported), so a
# make a test runs (make -n build-train, make plot) would get the suite's ARGS and refuse them: the tests' own makes
# start clean. MAKEFLAGS lists the command line's variables after " -- ".
for _assignment in os.environ.get("MAKEFLAGS", "").partition(" -- ")[2].split():
    os.environ.pop(_assignment.partition("=")[0], None)
for _inherited in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
    os.environ.pop(_inherited, None)

# A local cloud the developer left up (`make local-cloud`, in the checkout's .local-cloud/) would take over every
# cloud verb the tests run through make in the checkout: they look for theirs where none is, unless a test sets its own.
os.environ[FOLDER_ENV] = os.path.join(os.path.dirname(__file__), ".no-local-cloud-in-the-tests")

# gcsfs picks its filesystem class when it is first imported (GCSFS_LAYOUT_ENV, local_cloud.storage): a test that
# imports it before a bucket fixture sets the variable (the node twin does) would otherwise ask the Storage Control
# API, which no stand-in serves, before every bucket it touches. The suite never reaches Google's real Cloud Storage.
os.environ[GCSFS_LAYOUT_ENV] = "false"

GROUPS = (  # (start of the test's id, group)
    ("tests/docker/", "engine"),
    ("tests/launcher/test_node_twin.py", "engine"),
    ("tests/launcher/test_local_cloud.py", "engine"),
    ("tests/integration/test_xla.py", "xla"),
    ("tests/infra/test_standin_", "standin"),
    ("tests/integration/test_bench.py", "bench"),
)


def group_of(nodeid: str) -> str | None:
    return next((group for prefix, group in GROUPS if nodeid.startswith(prefix)), None)


# optionalhook: xdist's hook, unknown to a pytest without xdist (or run with -p no:xdist), which would otherwise
# stop at collection with "unknown hook"; the groups only matter where xdist schedules.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None  # xdist's own choice
    from xdist.scheduler import LoadScopeScheduling

    class PathGroupScheduling(LoadScopeScheduling):
        """LoadScope whose scope is a GROUPS group, or the test itself: a group's tests go to one worker."""

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    return PathGroupScheduling(config, log)


@pytest.fixture
def gcs(monkeypatch):
    """The run's bucket behind a Cloud Storage API (packages/local_cloud/storage.py), for every client in this process and
    those it starts: STORAGE_EMULATOR_HOST points google-cloud-storage and gcsfs at it. Buckets:
    ``gcs.create_bucket(name)``."""
    import gcsfs
    from local_cloud.storage import gcs_server

    with gcs_server() as server:
        for name, value in server.environ.items():  # for this process (where gcsfs may be imported already) and
            monkeypatch.setenv(name, value)         # for the processes it starts
        # fsspec keeps one gcsfs filesystem per arguments, its listings cached: not the last test's bucket
        gcsfs.GCSFileSystem.clear_instance_cache()
        yield server
