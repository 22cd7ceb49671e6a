"""What one preflight check concludes. preflight.py runs the checks into its Report; policies, project_setup and
tpu_quota add theirs to it, so the verdicts live here, below all four (no import cycle through preflight)."""

from __future__ import annotations

from dataclasses import dataclass, field

OK, WARN, FAIL = "ok", "warn", "FAIL"
QUOTA_CONSOLE = "https://console.cloud.google.com/iam-admin/quotas?project={project}"  # where a quota is raised


@dataclass
class Check:
    name: str
    status: str  # OK, WARN or FAIL
    detail: str
    fixes: list[str] = field(default_factory=list)
