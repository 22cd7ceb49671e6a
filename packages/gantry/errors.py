"""Errors a user can act on. Each carries what went wrong and the fix; the CLI prints
them as one line, ``gantry: error: <what>. <fix>``, and exits with ``status``."""

from __future__ import annotations

from gantry.status import ExitStatus


class GantryError(Exception):
    status = ExitStatus.ERROR

    def __init__(self, what: str, fix: str = "", detail: str = ""):
        super().__init__(what)
        self.what = what.rstrip(".")
        self.fix = fix
        self.detail = detail  # extra lines printed before the one-line error (e.g. terraform's text)

    def line(self) -> str:
        return f"{self.what}. {self.fix}".strip()


class ConfigError(GantryError):
    """infra/terraform.tfvars is missing or unreadable."""


class CredentialsError(GantryError):
    """No Application Default Credentials on this machine."""


class TerraformNotFound(GantryError):
    """The terraform binary is not on PATH."""


class TerraformError(GantryError):
    """terraform exited non-zero; ``output`` holds what it printed (stdout + stderr)."""

    def __init__(self, what: str, fix: str = "", output: str = "", returncode: int = 1):
        super().__init__(what, fix)
        self.output = output
        self.returncode = returncode


class CheckFailed(GantryError):
    """Preflight found at least one blocker."""

    status = ExitStatus.CHECK_FAILED
