"""A fresh project's first apply: APIs that Terraform has just enabled (Artifact Registry, IAM, ...)
answer 403 SERVICE_DISABLED for one to three minutes, and a service account just created is not
yet visible to IAM policy calls. Both heal by themselves; `gantry apply` waits and applies once more
(Terraform continues from what it created) instead of failing the user's first try.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

WAIT_ENV = "GANTRY_APPLY_RETRY_WAIT_S"
WAIT_S = 120.0  # Google: "If you enabled this API recently, wait a few minutes"

# Google's text for an API that is off or still being switched on, naming the service.
DISABLED = re.compile(r"(?:has not been used in project \S+ before or it is disabled|SERVICE_DISABLED)")
_SERVICE = re.compile(r"apis/api/([a-z0-9.-]+\.googleapis\.com)|\"service\": \"([a-z0-9.-]+\.googleapis\.com)\"")
# A service account created seconds ago, not yet known to the IAM policy of a bucket or repository.
_NEW_ACCOUNT = re.compile(r"Service account (\S+@\S+\.iam\.gserviceaccount\.com) does not exist")


def reason(terraform_output: str) -> str | None:
    """Why a failed apply is worth one more try after a wait, or None when it is not that."""
    if DISABLED.search(terraform_output):
        from gantry.preflight.project_setup import SETUP_APIS

        if set(services(terraform_output)) & set(SETUP_APIS):
            return None  # off before the apply, and Terraform cannot turn it on: waiting fixes nothing
        named = ", ".join(services(terraform_output)) or "a Google API"
        return f"{named} answered 403 SERVICE_DISABLED: newly enabled APIs take 1-3 minutes to answer"
    account = _NEW_ACCOUNT.search(terraform_output)
    if account:
        return f"IAM does not know the new service account {account[1]} yet: it takes a minute to propagate"
    return None


def services(text: str) -> list[str]:
    """The googleapis.com services Google's SERVICE_DISABLED errors in ``text`` name."""
    return sorted({a or b for a, b in _SERVICE.findall(text)})


def wait_s(environ: Mapping[str, str]) -> float:
    return float(environ.get(WAIT_ENV) or WAIT_S)
