"""Turn the Google errors users hit during `terraform apply` into one paragraph with a fix.

Terraform prints the provider's error wrapped to the terminal width, so the text is
unwrapped before matching. Recognised: stock-outs (ZONE_RESOURCE_POOL_EXHAUSTED and
_WITH_DETAILS, which sometimes names zones that have capacity), quota errors
(QUOTA_EXCEEDED / "Quota 'X' exceeded"), and a disabled API.
"""

from __future__ import annotations

import re

from gantry.config import Deployment
from gantry.gcp import propagation

_ZONE = re.compile(r"\b([a-z]+-[a-z]+\d+-[a-z])\b")
_QUOTA = re.compile(r"Quota '([A-Z0-9_]+)' exceeded\.?\s*Limit:\s*([\d.]+)(?:\s+in region ([a-z]+-[a-z]+\d+))?")


def _unwrapped(output: str) -> str:
    return " ".join(line.strip(" │╷╵\t") for line in output.splitlines())


def is_stockout(output: str) -> bool:
    text = _unwrapped(output)
    return "ZONE_RESOURCE_POOL_EXHAUSTED" in text or "does not have enough resources available" in text


def explain(output: str, deployment: Deployment, zones_offering: list[str] | None = None,
            tried: list[str] = ()) -> str | None:
    """A paragraph (what happened + what to do) for a recognised failure, else None. ``zones_offering``:
    the zones that offer the shape (preflight.zones_offering), for a stock-out where Google named none;
    ``tried``: the zones apply already tried (zone, then fallback_zones), never suggested again."""
    text = _unwrapped(output)
    if is_stockout(output):
        return _stockout(text, deployment, zones_offering, list(tried))
    if "QUOTA_EXCEEDED" in text or _QUOTA.search(text):
        return _quota(text, deployment)
    if propagation.DISABLED.search(text):
        named = propagation.services(output)
        name, command = (", ".join(named), " ".join(named)) if named else ("the API named above", "API_NAME")
        return (f"A Google API this deployment uses is disabled: {name}. Enable it with "
                f"`gcloud services enable {command} --project={deployment.project_id}`, then `make apply` again.")
    return None


def _stockout(text: str, d: Deployment, zones_offering: list[str] | None, tried: list[str]) -> str:
    failing = re.search(r"zones/([a-z]+-[a-z]+\d+-[a-z])", text)
    zone = failing.group(1) if failing else d.zone
    shape = d.shape
    spent = {zone, *tried}
    others = sorted({z for z in _ZONE.findall(text) if z not in spent})
    region_zones = [z for z in zones_offering or [] if z.startswith(d.region + "-") and z not in spent]
    if others:
        advice = (f"Google named zones with capacity: {', '.join(others)}. Set zone = \"{others[0]}\" in "
                  "infra/terraform.tfvars and run `make apply` again.")
    elif region_zones:
        advice = (f"Other zones of {d.region} offer {shape}: {', '.join(region_zones)}. Set zone = "
                  f"\"{region_zones[0]}\" in infra/terraform.tfvars and run `make apply` again, or retry later.")
    else:
        advice = ("Try another zone of the region (`make preflight` lists the zones that offer the shape), "
                  "set zone in infra/terraform.tfvars and run `make apply` again, or retry later.")
    spot = " Spot capacity is scarcer than on-demand; spot = false may get a VM sooner." if d.spot else ""
    where = (f"zones {', '.join(tried)} (zone, then fallback_zones) have" if len(tried) > 1 else f"zone {zone} has")
    return (f"Stock-out: {where} no capacity for {shape} right now (ZONE_RESOURCE_POOL_EXHAUSTED). "
            "This is Google's capacity, not your quota or configuration. " + advice + spot)


def _quota(text: str, d: Deployment) -> str:
    match = _QUOTA.search(text)
    if match:
        metric, limit = match.group(1), match.group(2)
        where = match.group(3) or "the project"
        what = f"quota {metric} in {where} is too low (limit {limit})"
    else:
        what = "a quota is too low (QUOTA_EXCEEDED)"
    return (f"Quota: {what}. `make preflight` shows every quota this deployment needs and the exact shortfall; "
            f"raise it at https://console.cloud.google.com/iam-admin/quotas?project={d.project_id} or lower "
            "node_count, then `make apply` again.")
