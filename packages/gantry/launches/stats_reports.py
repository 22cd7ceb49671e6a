"""The lines `gantry status` reads from a run's stats in the bucket, as the launch's gantry.yaml names them
(RunSpec.show's reports): for each, the newest record holding its keys, e.g.

    {title: Eval error, keys: "eval/*/error", format: "{:.1%}"}
    -> Eval error at step 600: easy 5.0%  hard 12.0%

A `*` stands for one path segment (no /), shown as the figure's name; keys without one show one number."""

from __future__ import annotations

import json
import re

from launch_contract import STEP_KEYS, RunSpec, sync_url

FRESH = {"use_listings_cache": False}  # each read asks the bucket (runs.FRESH)


def stats_url(spec: RunSpec, run_url: str) -> str:
    """Where the launch's stats are in the bucket: its --stats file's node-0 copy, which the agent keeps when the
    file lies in a --sync folder (gantry.yaml's reports require that: program_file); "" when it keeps none."""
    for folder in spec.sync:
        if spec.stats_file.startswith(folder + "/"):
            return f"{sync_url(run_url, 0, folder)}/{spec.stats_file[len(folder) + 1:]}"
    return ""


def records_newest_first(url: str):
    """The JSON object records of a stats file (JSON lines, or one object), newest first; none when it is missing."""
    import fsspec

    try:
        with fsspec.open(url, "r", **FRESH) as stats:
            text = stats.read()
    except (FileNotFoundError, OSError):
        return
    try:
        whole = json.loads(text)
        lines = [text] if isinstance(whole, dict) else []
    except ValueError:
        lines = text.splitlines()
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def pattern_of(keys: str) -> re.Pattern:
    return re.compile("^" + "/".join("([^/]+)" if part == "*" else re.escape(part) for part in keys.split("/")) + "$")


def newest_report(records, keys: str) -> tuple[int | None, dict[str, float]] | None:
    """(step, {name: value}) of the newest record with a number under ``keys``; name: what `*` stood for, or keys;
    the step: its first STEP_KEYS number, as the agent reads a stats file's."""
    pattern = pattern_of(keys)
    for record in records:
        found = {}
        for key, value in record.items():
            match = pattern.match(str(key))
            if match and isinstance(value, (int, float)) and not isinstance(value, bool):
                found[match.group(1) if match.groups() else key] = float(value)
        if found:
            steps = [record[k] for k in STEP_KEYS if isinstance(record.get(k), (int, float))]
            return (int(steps[0]) if steps else None), found
    return None


def report_lines(spec: RunSpec, run_url: str) -> list[str]:
    """One line per report the launch names whose keys the stats hold, with its newest figures; while they hold
    none of them, one line saying so (a report that never comes, such as an arena left off, says nothing later)."""
    reports = spec.show.get("reports") or []
    url = stats_url(spec, run_url)
    if not reports or not url:
        return []
    records = list(records_newest_first(url))
    lines = []
    for report in reports:
        found = newest_report(records, report["keys"])
        if found is None:
            continue
        step, figures = found
        text = report.get("format", "{:g}")
        shown = "  ".join(text.format(v) if len(figures) == 1 and k == report["keys"] else f"{k} {text.format(v)}"
                          for k, v in sorted(figures.items()))
        lines.append(f"{report['title']}{'' if step is None else f' at step {step}'}: {shown}")
    if not lines:
        titles = ", ".join(report["title"] for report in reports)
        lines.append(f"{titles}: none in {url.rsplit('/', 1)[-1]} yet")
    return lines
