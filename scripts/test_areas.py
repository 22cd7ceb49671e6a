"""Minutes of each area of the suite, from the JUnit report `make test` writes (.cache/test-report.xml).

    python3 scripts/test_areas.py [REPORT]

.ci/run prints it after the tests, so a regression in one area shows in CI's log. An area's minutes are the sum
of its tests' setup, call and teardown: with xdist workers they overlap, so the areas add up to more than the wall
time of the run.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

# First match wins: (fragment of the test's file, area).
AREAS = (
    ("tests/docker/test_devcontainer", "dev container"),
    ("tests/launcher/test_node_twin", "twin"),
    ("tests/launcher/test_local_cloud", "local cloud"),
    ("tests/integration/test_xla", "xla"),
    ("tests/docker/", "docker"),
    ("tests/infra/", "infra"),
    ("tests/launcher/", "launcher"),
    ("tests/integration/", "integration"),
    ("tests/unit/", "unit"),
    ("tests/index/", "index"),
)


def area_of(classname: str) -> str:
    path = "tests/" + classname.split("tests.", 1)[-1].replace(".", "/")
    return next((area for fragment, area in AREAS if path.startswith(fragment.rstrip("/"))), "other")


def main(report: str = ".cache/test-report.xml") -> int:
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"test_areas: no report to read ({e})", file=sys.stderr)
        return 1
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    recorded: list[str] = []  # what tests measured of their own parts (record_property), e.g. the dev container's
    for case in root.iter("testcase"):
        area = area_of(case.get("classname", ""))
        seconds[area] += float(case.get("time", 0))
        counts[area] += 1
        recorded += [f"{p.get('name')}={p.get('value')}" for p in case.iter("property")]
    for area in [a for _, a in AREAS] + ["other"]:
        if counts[area]:
            print(f"  {area:<14} {seconds[area] / 60:5.1f} min  {counts[area]:4d} tests")
    if recorded:
        print(f"  recorded: {' '.join(recorded)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
