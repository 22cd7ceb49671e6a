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


# The launcher's own dependencies: pyproject.toml's [cloud] extra, which `make install` (the trainer alone, as
# in the container) leaves out. Their absence is an install step to take, not a traceback to read.
CLOUD_MODULES = {"python_terraform", "google", "docker"}


def missing_cloud_extra(error: ModuleNotFoundError) -> GantryError | None:
    """The one-line fix for a launcher started without its cloud packages; None for any other missing module."""
    if (error.name or "").split(".")[0] not in CLOUD_MODULES:
        return None
    return GantryError(f"no module {error.name}: the launcher's cloud packages are not installed",
                       "Run `make install-dev`.")
