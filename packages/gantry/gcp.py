"""Credentials and google-cloud-compute clients, made in one place.

``GANTRY_COMPUTE_ENDPOINT`` (e.g. ``http://127.0.0.1:8089``) points every Compute client
at another endpoint with anonymous credentials: the test suite's fake Compute API, or an
emulator. Without it the clients use Application Default Credentials and the real API.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from gantry.errors import CredentialsError

ENDPOINT_ENV = "GANTRY_COMPUTE_ENDPOINT"
LOGIN_FIX = ("Run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS "
             "to a service-account key file), then `make preflight` again.")
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]


def find_credentials(environ: Mapping[str, str] | None = None):
    """Return (credentials, endpoint or None). Raises CredentialsError with the login command."""
    environ = os.environ if environ is None else environ
    endpoint = environ.get(ENDPOINT_ENV) or None
    if endpoint:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials(), endpoint
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=_SCOPES)
    except DefaultCredentialsError as exc:
        first = str(exc).split(". ")[0]
        raise CredentialsError(f"no Google Cloud credentials found on this machine ({first})", LOGIN_FIX) from exc
    return credentials, None


@dataclass
class Compute:
    """The Compute Engine clients gantry uses, sharing credentials and endpoint (REST)."""

    credentials: object
    endpoint: str | None = None

    @classmethod
    def connect(cls, environ: Mapping[str, str] | None = None) -> Compute:
        credentials, endpoint = find_credentials(environ)
        return cls(credentials, endpoint)

    def describe_credentials(self) -> str:
        if self.endpoint:
            return f"anonymous, for the endpoint {self.endpoint} ({ENDPOINT_ENV})"
        who = getattr(self.credentials, "service_account_email", None) or "your user account"
        return f"Application Default Credentials ({type(self.credentials).__name__}, {who})"

    def _client(self, name: str):
        from google.api_core.client_options import ClientOptions
        from google.cloud import compute_v1

        options = ClientOptions(api_endpoint=self.endpoint) if self.endpoint else None
        return getattr(compute_v1, name)(credentials=self.credentials, client_options=options, transport="rest")

    @cached_property
    def projects(self):
        return self._client("ProjectsClient")

    @cached_property
    def regions(self):
        return self._client("RegionsClient")

    @cached_property
    def zones(self):
        return self._client("ZonesClient")

    @cached_property
    def machine_types(self):
        return self._client("MachineTypesClient")

    @cached_property
    def accelerator_types(self):
        return self._client("AcceleratorTypesClient")

    @cached_property
    def instances(self):
        return self._client("InstancesClient")

    @cached_property
    def disks(self):
        return self._client("DisksClient")

    @cached_property
    def addresses(self):
        return self._client("AddressesClient")


def short_name(url: str) -> str:
    """'https://.../zones/us-central1-a' -> 'us-central1-a'."""
    return url.rstrip("/").rsplit("/", 1)[-1]
