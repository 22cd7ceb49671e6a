"""`gantry apply`'s placement: the zones it tries in order (a stock-out moves on to fallback_zones), a fresh
project's propagation delay waited out once, and a failure explained in the user's terms with what Terraform left
behind (half-applied or nothing). The verb (cli/apply.py) asks and prints; this decides where and retries."""

from __future__ import annotations

import time
from dataclasses import replace

from gantry import diagnose, preflight
from gantry.errors import GantryError, TerraformError
from gantry.gcp import Compute, propagation
from gantry.terraform import Terraform


def zones_to_try(d, outputs: dict, env) -> list[str]:
    """The zones apply tries, in order. Without nodes: zone, then fallback_zones. Nodes that exist stay where
    they are (moving them would recreate them mid-run): in the fallback zone a stock-out moved them to, else
    in zone (a zone the user changed by hand is theirs to move to)."""
    if not outputs.get("node_names"):
        return [d.zone, *(z for z in d.fallback_zones if z != d.zone)]
    where = outputs.get("zone")
    if where != d.zone and where in d.fallback_zones:
        env.say(f"The nodes are in {where}, where a stock-out in {d.zone} moved them (fallback_zones): applying "
                "there. To move them to zone, `make destroy` first.")
        return [where]
    return [d.zone]


def apply_in_zones(tf: Terraform, var_file, d, zones: list[str], env) -> str:
    """Apply in the first of ``zones`` with capacity; return it. Only a stock-out moves on to the next zone; the
    last zone (zones is never empty: zone comes first) returns or raises."""
    for n, zone in enumerate(zones):
        try:
            apply_once(tf, var_file, env, {"zone": zone} if zone != d.zone else None)
            return zone
        except TerraformError as error:
            if n + 1 < len(zones) and diagnose.is_stockout(error.output):
                env.say("", f"Stock-out: zone {zone} has no capacity for {d.shape} right now. Moving to "
                            f"{zones[n + 1]} (fallback_zones) and applying again.", "")
                continue
            raise explained(error, replace(d, zone=zone), tf, env, tried=zones[:n + 1]) from error


def apply_once(tf: Terraform, var_file, env, overrides: dict[str, str] | None) -> None:
    """terraform apply, once more after a wait when a fresh project's APIs or IAM are still propagating."""
    try:
        tf.apply(var_file, overrides)
    except TerraformError as error:
        why = propagation.reason(error.output)
        if why is None:
            raise
        wait = propagation.wait_s(env.environ)
        env.say("", f"Applying once more in {wait:.0f} s: {why}.")
        time.sleep(wait)
        tf.apply(var_file, overrides)


def zones_offering(deployment, env) -> list[str] | None:
    """Where else the shape is offered, so a stock-out's advice names zones; None when Compute cannot say."""
    from google.api_core.exceptions import GoogleAPIError

    try:
        return preflight.zones_offering(deployment, Compute.connect(env.environ))
    except (GantryError, GoogleAPIError, OSError):
        return None


def explained(error: TerraformError, deployment, tf: Terraform, env, tried: list[str]) -> TerraformError:
    """One paragraph: what failed, in the user's terms, and what Terraform left behind."""
    known = diagnose.explain(error.output, deployment, zones_offering(deployment, env) if
                             diagnose.is_stockout(error.output) else None, tried)
    what = f"terraform apply failed. {known.rstrip('.')}" if known else error.what
    try:
        created = tf.state_list()
    except TerraformError:
        created = None
    if created is None:
        left = ("Terraform's state could not be read, so resources may exist: run `make destroy` to be sure "
                "nothing bills.")
    elif created:
        shown = ", ".join(created[:8]) + (f" and {len(created) - 8} more" if len(created) > 8 else "")
        left = (f"Half-applied: {len(created)} resource(s) were created before the failure and exist now "
                f"({shown}); run `make apply` again once fixed (it continues from there) or `make destroy` "
                "to remove them.")
    else:
        left = "Nothing was created."
    return TerraformError(what, left,
                          output=error.output, returncode=error.returncode)
