"""Placeholder Gantry node agent, shipped until packages/gantry/agent.py exists.

It proves the boot path (metadata key gantry-agent -> /opt/gantry/agent.py -> gantry-agent.service)
and reports itself, but runs no trainer. Stdlib only, like the real agent: it waits on the run
spec with the metadata server's wait-for-change (never a busy loop) and logs what it would do.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

METADATA = "http://metadata.google.internal/computeMetadata/v1/instance"
HEADERS = {"Metadata-Flavor": "Google"}
RUN_KEY = os.environ.get("GANTRY_RUN_METADATA_KEY", "gantry-run")
NAMESPACE = os.environ.get("GANTRY_GUEST_ATTRIBUTES_NAMESPACE", "gantry")
LOG_FILE = os.environ.get("GANTRY_AGENT_LOG_FILE", "/var/log/gantry-agent.log")


def log(message):
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} gantry-agent(placeholder): {message}"
    print(line, flush=True)  # journald
    try:
        with open(LOG_FILE, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError:
        pass


def report(key, value):
    request = urllib.request.Request(
        f"{METADATA}/guest-attributes/{NAMESPACE}/{key}", data=value.encode(), headers=HEADERS, method="PUT"
    )
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except OSError as error:
        log(f"could not report {NAMESPACE}/{key}: {error}")


def wait_for_run_spec(etag):
    """Block up to 5 minutes until the run spec changes; returns (value or None, etag)."""
    url = f"{METADATA}/attributes/{RUN_KEY}?wait_for_change=true&timeout_sec=300&last_etag={etag}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=HEADERS), timeout=330) as response:
            return response.read().decode(), response.headers.get("ETag", "0")
    except urllib.error.HTTPError as error:
        if error.code == 404:  # no run spec yet: the metadata server answers at once, so pace it
            time.sleep(30)
            return None, "0"
        raise


def main():
    log("started: this is the placeholder agent; it reports but runs no trainer")
    report("agent", "placeholder")
    etag = "0"
    backoff = 5
    while True:
        try:
            spec, etag = wait_for_run_spec(etag)
            backoff = 5
        except OSError as error:
            log(f"metadata server unreachable ({error}); retrying in {backoff} s")
            time.sleep(backoff)
            backoff = min(backoff * 2, 300)
            continue
        if spec is not None:
            try:
                run_id = json.loads(spec).get("run_id", "?")
            except ValueError:
                run_id = "unparseable"
            log(f"run spec {run_id} received; the placeholder agent does not start trainers")
            report("agent", f"placeholder: ignored run {run_id}")


if __name__ == "__main__":
    sys.exit(main())
