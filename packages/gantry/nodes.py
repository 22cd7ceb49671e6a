"""Which API drives the deployment's nodes: Compute Engine for VMs, Cloud TPU for a TPU VM. Above runs.py (the
verbs' library, which defines the NodeApi seam) and both implementations of it, so none of the three imports
another in a circle."""

from __future__ import annotations

from collections.abc import Mapping

from gantry.launches import Cluster, NodeApi


def connect(infra_dir, environ: Mapping[str, str], stdout=None, stderr=None) -> tuple[Cluster, NodeApi]:
    """The deployment's nodes (terraform output of infra/) and the API that drives them: Cloud TPU for a TPU VM
    (use_tpu), Compute Engine for the VMs."""
    from gantry.terraform import Terraform

    cluster = Cluster.from_outputs(Terraform(infra_dir, stdout=stdout, stderr=stderr).outputs())
    if cluster.use_tpu:
        from gantry.gcp import GoogleApis
        from gantry.gcp.tpu_nodes import TpuNodes

        return cluster, TpuNodes(GoogleApis.connect(environ), cluster)
    from gantry.gcp import Compute
    from gantry.gcp.compute_nodes import ComputeNodes

    return cluster, ComputeNodes(Compute.connect(environ), cluster)
