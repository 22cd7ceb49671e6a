"""The Compute API's JSON as Google writes it, for local_cloud.compute: quotas, list filters, error bodies (with the
ErrorInfo detail google.api_core reads ``reason`` from), the front end's transient answers, timestamps, and the HTTP
handler that serves FakeCompute.handle's answers."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import parse_qs, urlsplit

from local_cloud.loopback import StandInHandler


def _quotas(quotas: dict[str, tuple[float, float]]) -> list[dict]:
    return [{"metric": m, "limit": lim, "usage": use} for m, (lim, use) in sorted(quotas.items())]


_LABEL_FILTER = re.compile(r'labels\.(?P<key>[\w-]+)\s*=\s*"?(?P<value>[^"\s]*)"?')
_NAME_FILTER = re.compile(r'name\s*=\s*"?(?P<value>[^"\s]*)"?')


def _filtered(items: list[dict], query: dict[str, list[str]]) -> list[dict]:
    """Apply the filter forms the launcher uses: labels.KEY = "VALUE" and name = "VALUE"."""
    text = query.get("filter", [""])[0]
    if not text:
        return items
    by_name = _NAME_FILTER.fullmatch(text.strip())
    if by_name:
        return [i for i in items if i.get("name") == by_name["value"]]
    match = _LABEL_FILTER.fullmatch(text.strip())
    if not match:
        raise ValueError(f"fake compute: unsupported filter {text!r}")
    return [i for i in items if i.get("labels", {}).get(match["key"]) == match["value"]]


def _error(status: int, reason: str, message: str) -> dict:
    details = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                "domain": "googleapis.com", "metadata": {"service": "compute.googleapis.com"}}]
    return {"error": {"code": status, "message": message, "errors": [{"message": message, "reason": reason}],
                      "details": details}}


# What Google's front end answers when a backend is briefly unavailable or overloaded (no ErrorInfo).
TRANSIENT_BODIES = {
    503: {"error": {"code": 503, "message": "The service is currently unavailable.", "status": "UNAVAILABLE",
                    "errors": [{"message": "The service is currently unavailable.", "domain": "global",
                                "reason": "backendError"}]}},
    500: {"error": {"code": 500, "message": "Internal error. Please try again or contact Google Support.",
                    "status": "INTERNAL",
                    "errors": [{"message": "Internal error. Please try again or contact Google Support.",
                                "domain": "global", "reason": "backendError"}]}},
    # Google's front end answers 502 with an HTML page, not JSON.
    502: "<!DOCTYPE html>\n<html lang=en>\n  <title>Error 502 (Server Error)!!1</title>\n  <p><b>502.</b> "
         "<ins>That's an error.</ins>\n  <p>The server encountered a temporary error and could not complete "
         "your request.<p>Please try again in 30 seconds.  <ins>That's all we know.</ins>\n",
    0: None,
    429: {"error": {"code": 429, "message": "Quota exceeded for quota metric 'Read requests' and limit "
                    "'Read requests per minute' of service 'compute.googleapis.com'.", "status": "RESOURCE_EXHAUSTED",
                    "errors": [{"message": "Rate Limit Exceeded", "domain": "usageLimits",
                                "reason": "rateLimitExceeded"}]}},
}


def service_disabled(project: str) -> tuple[int, str, str]:
    """The 403 Google sends when the Compute Engine API is off in a project."""
    return (403, "SERVICE_DISABLED",
            (f"Compute Engine API has not been used in project {project} before or it is disabled. Enable it by "
             f"visiting https://console.developers.google.com/apis/api/compute.googleapis.com/overview?project={project} "
             "then retry."))


class _Handler(StandInHandler):
    fake: object  # the FakeCompute serving it

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.do_GET(json.loads(self.rfile.read(length) or b"{}"), "POST")

    def do_GET(self, request_body: dict | None = None, method: str = "GET") -> None:
        url = urlsplit(self.path)
        self.fake.requests.append(f"{method} {self.path}")
        try:
            status, body = self.fake.handle(url.path, parse_qs(url.query), request_body)
        except Exception as exc:  # noqa: BLE001 (a bug in the fake: make it loud in the test, not a hang)
            status, body = 500, _error(500, "internalError", f"fake compute: {exc!r}")
        if status == 0:  # a connection reset: no answer at all
            self.close_connection = True
            return
        if isinstance(body, str):  # Google's front end answers some errors with an HTML page
            self.reply(status, body.encode(), "text/html; charset=UTF-8")
        else:
            self.reply_json(status, body)


def _rfc3339(epoch: float) -> str:
    """The shape Compute writes its timestamps in: local time with milliseconds and an offset."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch)) + f".{int(epoch % 1 * 1000):03d}" + \
        time.strftime("%z", time.localtime(epoch))[:3] + ":" + time.strftime("%z", time.localtime(epoch))[3:]
