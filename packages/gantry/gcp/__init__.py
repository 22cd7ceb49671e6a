"""Credentials and google-cloud-compute clients, made in one place.

``GANTRY_COMPUTE_ENDPOINT`` (e.g. ``http://127.0.0.1:8089``) points every Compute client
at another endpoint with anonymous credentials: the test suite's fake Compute API, or an
emulator. Without it the clients use Application Default Credentials and the real API.

Every Compute call goes through one retry policy (``Compute.retry``, google-api-core's
``Retry``): 429, 500, 502, 503, 504 and dropped connections are retried with exponential
backoff, so an hour of `gantry logs --follow` survives a transient error. Metadata writes
also retry 412 conditionNotMet (another writer changed the fingerprint): the caller wraps
its whole read-modify-write in ``Compute.retry_fingerprint`` so the fingerprint is read
again. ``GANTRY_RETRY_INITIAL_S``, ``GANTRY_RETRY_MAXIMUM_S`` and ``GANTRY_RETRY_DEADLINE_S``
tune the backoff (tests make it short).
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from gantry.errors import CredentialsError

ENDPOINT_ENV = "GANTRY_COMPUTE_ENDPOINT"
# Replaces https://SERVICE.googleapis.com for the APIs the launcher calls over plain REST
# (Cloud Storage buckets, Artifact Registry, IAM, Resource Manager org policies).
APIS_ENDPOINT_ENV = "GANTRY_GOOGLEAPIS_ENDPOINT"
LOGIN_FIX = ("Run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS "
             "to a service-account key file), then `make preflight` again.")
_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# Seconds: first wait, longest wait, and how long one call may keep retrying in all.
RETRY_ENV = {"initial": "GANTRY_RETRY_INITIAL_S", "maximum": "GANTRY_RETRY_MAXIMUM_S",
             "timeout": "GANTRY_RETRY_DEADLINE_S"}
RETRY_DEFAULTS = {"initial": 1.0, "maximum": 30.0, "timeout": 300.0}


def is_transient(exc: Exception) -> bool:
    """Worth another try: Google's 429/500/502/503/504 and connections dropped on the way."""
    from google.api_core import exceptions as api
    from google.auth.exceptions import TransportError
    from requests.exceptions import ChunkedEncodingError, ConnectionError

    if "NameResolutionError" in repr(exc) or "Name or service not known" in str(exc):
        return False  # no DNS (offline, a proxy needed): minutes of retries would only hide that
    return isinstance(exc, (api.TooManyRequests, api.InternalServerError, api.BadGateway,
                            api.ServiceUnavailable, api.GatewayTimeout,
                            ConnectionError, ChunkedEncodingError, TransportError))


def is_fingerprint_race(exc: Exception) -> bool:
    """412 conditionNotMet: the metadata changed since it was read (setMetadata's fingerprint)."""
    from google.api_core.exceptions import PreconditionFailed

    return isinstance(exc, PreconditionFailed)


def retry_policy(environ: Mapping[str, str] | None = None):
    """The one Retry every Google API call of the launcher uses (google-api-core)."""
    from google.api_core.retry import Retry

    environ = os.environ if environ is None else environ
    knobs = {key: float(environ.get(name) or RETRY_DEFAULTS[key]) for key, name in RETRY_ENV.items()}
    return Retry(predicate=is_transient, multiplier=2.0, **knobs)


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
    retry: object = field(default_factory=retry_policy)  # google.api_core.retry.Retry

    @classmethod
    def connect(cls, environ: Mapping[str, str] | None = None) -> Compute:
        credentials, endpoint = find_credentials(environ)
        return cls(credentials, endpoint, retry_policy(environ))

    def retry_fingerprint(self, read_modify_write: Callable):
        """``read_modify_write`` retried on transient errors and on 412 (it must read the fingerprint anew)."""
        race = self.retry.with_predicate(lambda exc: is_fingerprint_race(exc) or is_transient(exc))
        return race(read_modify_write)

    def wait(self, operation):
        """Wait for a Compute operation, polling with the same retry policy."""
        return operation.result(retry=self.retry)

    def describe_credentials(self) -> str:
        if self.endpoint:
            return f"anonymous, for the endpoint {self.endpoint} ({ENDPOINT_ENV})"
        who = getattr(self.credentials, "service_account_email", None) or "your user account"
        return f"Application Default Credentials ({type(self.credentials).__name__}, {who})"

    def _client(self, name: str):
        from google.api_core.client_options import ClientOptions
        from google.cloud import compute_v1

        options = ClientOptions(api_endpoint=self.endpoint) if self.endpoint else None
        client = getattr(compute_v1, name)(credentials=self.credentials, client_options=options, transport="rest")
        return _Retrying(client, self.retry)

    @cached_property
    def projects(self):
        return self._client("ProjectsClient")

    @cached_property
    def images(self):
        return self._client("ImagesClient")

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

    @cached_property
    def networks(self):
        return self._client("NetworksClient")

    @cached_property
    def subnetworks(self):
        return self._client("SubnetworksClient")

    @cached_property
    def firewalls(self):
        return self._client("FirewallsClient")

    @cached_property
    def routers(self):
        return self._client("RoutersClient")


class _Retrying:
    """A Compute client whose every API method gets ``retry=policy`` unless the caller passes one."""

    def __init__(self, client, policy):
        self._client, self._policy = client, policy

    def __getattr__(self, name: str):
        attr = getattr(self._client, name)
        if name.startswith("_") or not callable(attr) or "retry" not in inspect.signature(attr).parameters:
            return attr
        return functools.partial(attr, retry=self._policy)


@dataclass
class GoogleApis:
    """JSON REST calls to the Google APIs gantry has no client library for, through google-auth's
    AuthorizedSession, with the same retry policy and google-api-core's exceptions."""

    credentials: object
    endpoint: str | None = None  # APIS_ENDPOINT_ENV: one server answering every service (tests)
    retry: object = field(default_factory=retry_policy)

    @classmethod
    def connect(cls, environ: Mapping[str, str] | None = None) -> GoogleApis:
        environ = os.environ if environ is None else environ
        endpoint = environ.get(APIS_ENDPOINT_ENV) or None
        if endpoint:
            from google.auth.credentials import AnonymousCredentials

            return cls(AnonymousCredentials(), endpoint.rstrip("/"), retry_policy(environ))
        credentials, _ = find_credentials(environ)
        return cls(credentials, None, retry_policy(environ))

    @cached_property
    def _session(self):
        from google.auth.transport.requests import AuthorizedSession

        return AuthorizedSession(self.credentials)

    def url(self, service: str, path: str) -> str:
        return f"{self.endpoint or f'https://{service}.googleapis.com'}/{path.lstrip('/')}"

    def call(self, method: str, service: str, path: str, body: dict | None = None,
             params: dict | None = None) -> dict:
        """One request; a non-2xx answer raises google.api_core.exceptions (NotFound, Forbidden, ...)."""
        from google.api_core.exceptions import from_http_response

        def once() -> dict:
            response = self._session.request(method, self.url(service, path), json=body, params=params, timeout=60)
            if response.status_code >= 400:
                error = from_http_response(response)
                error.message = error.message.removeprefix(f"{method} {response.request.url}: ")  # Google's text only
                raise error
            return response.json() if response.content else {}

        return self.retry(once)()

    def list(self, service: str, path: str, key: str, params: dict | None = None) -> list[dict]:
        """Every item of a paged list (``key``: "items", "repositories", "accounts", ...)."""
        items, params = [], dict(params or {})
        while True:
            page = self.call("GET", service, path, params=params)
            items.extend(page.get(key, []))
            if not page.get("nextPageToken"):
                return items
            params["pageToken"] = page["nextPageToken"]


def short_name(url: str) -> str:
    """'https://.../zones/us-central1-a' -> 'us-central1-a'."""
    return url.rstrip("/").rsplit("/", 1)[-1]
