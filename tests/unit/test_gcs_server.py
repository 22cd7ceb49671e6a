"""The tests' bucket (packages/local_cloud/storage.py): fake-gcs-server answers the Cloud Storage JSON API, goes with its objects
when the block ends, and the docs name the version the wheel bundles."""

import json
import urllib.error
import urllib.request

import pytest
from checkout import REPO
from local_cloud.storage import gcs_server, version

DOCS = REPO / "docs"


def test_the_server_holds_what_a_client_wrote_and_is_gone_after_the_block():
    with gcs_server("runs-bucket") as gcs:
        gcs.write("gs://runs-bucket/runs/r1/stats.jsonl", b'{"step": 1}\n')
        assert gcs.read("gs://runs-bucket/runs/r1/stats.jsonl") == b'{"step": 1}\n'
        assert gcs.names("gs://runs-bucket/runs") == ["r1/stats.jsonl"]
        assert not gcs.exists("gs://runs-bucket/runs/r2/stats.jsonl")
        listed = json.loads(urllib.request.urlopen(f"{gcs.url}/storage/v1/b", timeout=10).read())
        assert [b["name"] for b in listed["items"]] == ["runs-bucket"]  # buckets.list, as Google shapes it
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{gcs.url}/storage/v1/b", timeout=5)


def test_the_docs_name_the_servers_version():
    bundled = version().split("+")[0]  # v1.54.0+dirty: the tag, built by the wheel from a tree with changes
    assert bundled.startswith("v1.")
    for doc in ("ARCHITECTURE.md", "LAUNCHER.md"):
        assert f"fake-gcs-server {bundled}" in (DOCS / doc).read_text(), f"docs/{doc} names another version"
