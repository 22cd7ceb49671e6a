"""The runs bucket: emptied only on `gantry destroy --delete-data`.

infra/ creates the bucket with ``force_destroy = var.bucket_force_destroy`` (false by
default), so `terraform destroy` refuses to delete a bucket that still holds run data:
that refusal is how the data is kept. ``--delete-data`` empties the bucket first, and
then Terraform deletes it. STORAGE_EMULATOR_HOST, which google-cloud-storage reads itself,
points the client at an emulator (the tests' fake-gcs-server).
"""

from __future__ import annotations

from collections.abc import Mapping

from gantry.gcp import find_credentials

# The google provider's own refusal, and the GCS API's 409 should the provider let a delete through.
NOT_EMPTY_MARKERS = ("containing objects without `force_destroy`", "bucket you tried to delete is not empty")


def refused_because_not_empty(terraform_output: str) -> bool:
    """Did terraform destroy stop at the bucket because it holds objects?"""
    return any(marker in terraform_output for marker in NOT_EMPTY_MARKERS)


def empty(bucket_name: str, project: str, environ: Mapping[str, str]) -> int:
    """Delete every object in the bucket; returns how many were deleted."""
    from google.cloud import storage

    credentials, _ = find_credentials(environ)
    client = storage.Client(project=project, credentials=credentials)
    deleted = 0
    for blob in client.list_blobs(bucket_name):
        blob.delete()
        deleted += 1
    return deleted
