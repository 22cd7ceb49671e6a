"""Suite-wide: which tests share an xdist worker (`make test` runs pytest-xdist with --dist loadgroup).

Tests that build on one expensive session fixture run on one worker, in collection order, so it is made once:
the Docker engine's tests share the CPU image (tests/docker/conftest.py) and the layer cache of `gantry build`
in the node twin; the XLA tests share their venv; the stand-in provider's tests share its mirror, init and plan.
Everything else is spread over the workers test by test.
"""

from __future__ import annotations

import pytest

GROUPS = (  # first match wins: (marker or path fragment, group)
    ("docker", "engine"),
    ("xla", "xla"),
    ("tests/infra/test_standin_", "standin"),
)


def _group(item: pytest.Item) -> str | None:
    for key, group in GROUPS:
        if item.get_closest_marker(key) is not None or key in item.nodeid:
            return group
    return None


def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):  # its marker exists only with it
        return
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
