"""After destroy: list everything in the project still labelled with the deployment.

Terraform's state says what Terraform thinks it owns; this asks Compute what really
exists (instances, disks, static addresses carrying ``gantry-deployment = <name>``),
so a VM created by hand, a disk kept by ``auto_delete = false`` or a lost state file
shows up instead of billing quietly.
"""

from __future__ import annotations

from dataclasses import dataclass

from gantry.config import Deployment
from gantry.gcp import Compute, short_name


@dataclass(frozen=True)
class Leftover:
    kind: str  # instance, disk, address
    name: str
    location: str  # zone or region
    detail: str

    def delete_command(self, project: str) -> str:
        where = "--region" if self.kind == "address" else "--zone"
        group = {"instance": "instances", "disk": "disks", "address": "addresses"}[self.kind]
        return f"gcloud compute {group} delete {self.name} {where}={self.location} --project={project}"


def leftovers(deployment: Deployment, compute: Compute) -> list[Leftover]:
    request = {"project": deployment.project_id, "filter": deployment.labels_filter}
    found: list[Leftover] = []
    for _, scoped in compute.instances.aggregated_list(request=request):
        for vm in scoped.instances:
            found.append(Leftover("instance", vm.name, short_name(vm.zone),
                                  f"{short_name(vm.machine_type)}, {vm.status}"))
    for _, scoped in compute.disks.aggregated_list(request=request):
        for disk in scoped.disks:
            found.append(Leftover("disk", disk.name, short_name(disk.zone), f"{disk.size_gb} GB"))
    for _, scoped in compute.addresses.aggregated_list(request=request):
        for address in scoped.addresses:
            found.append(Leftover("address", address.name, short_name(address.region), address.address))
    return found


def render(deployment: Deployment, found: list[Leftover]) -> list[str]:
    label = f"gantry-deployment={deployment.deployment_name}"
    if not found:
        return [(f"Inventory of project {deployment.project_id} (label {label}): no instances, disks or "
                 "addresses left; nothing left billing.")]
    lines = [(f"Inventory of project {deployment.project_id} (label {label}): {len(found)} resource(s) "
              "still exist and bill:")]
    for item in found:
        lines.append(f"  {item.kind:<8} {item.name:<32} {item.location:<16} {item.detail}")
    lines.append("Delete them with:")
    lines.extend(f"  {item.delete_command(deployment.project_id)}" for item in found)
    return lines
