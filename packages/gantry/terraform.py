"""The one place gantry talks to Terraform: a small adapter over python-terraform 0.10.1.

    tf = Terraform("infra")
    tf.init()
    tf.plan("infra/terraform.tfvars")      # -> True when changes are pending
    tf.apply("infra/terraform.tfvars")
    tf.outputs()                           # -> {"bucket": "gantry-runs-...", ...}
    tf.destroy("infra/terraform.tfvars")

python-terraform predates Terraform 1.x, so only the calls that still work are used:
``apply(skip_plan=True)`` (= ``-auto-approve``), and ``cmd(...)`` with every flag spelled
out for init, plan, destroy, output and state. Not used: ``init()`` (it adds ``-reconfigure``,
which makes Terraform forget the state when the backend changes: a user who adds
infra/backend.tf after the first apply would start from an empty state and orphan every
resource), ``destroy()`` (it passes ``-force``, which 1.x rejects), ``output(name)`` (raises), ``output()`` (returns None on failure and drops
Terraform's error text, so ``cmd("output", json=...)`` is used instead), and
``synchronous=False`` (it leaks into the command line as ``-synchronous=false``).

Long commands (init, plan, apply, destroy) stream Terraform's output to the user while
it runs and keep a copy, so a failure raises TerraformError carrying Terraform's own
error text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import TextIO

import python_terraform
from python_terraform import IsFlagged

from gantry.errors import TerraformError, TerraformNotFound

INSTALL_HINT = ("Install Terraform >= 1.9 (https://developer.hashicorp.com/terraform/install) "
                "and make sure `terraform version` works in this shell.")
_KEEP_CHARS = 200_000  # how much of a command's output is kept for error messages
# What `terraform init -input=false` says when the backend changed and the state would have to move.
BACKEND_CHANGED_MARKERS = ("Can't ask approval for state migration", "Backend configuration changed",
                           "Backend initialization required")


class Terraform:
    """Terraform commands run in ``working_dir`` (a root module such as infra/)."""

    def __init__(self, working_dir: str | Path, binary: str = "terraform",
                 stdout: TextIO | None = None, stderr: TextIO | None = None):
        self.working_dir = Path(working_dir).resolve()
        self.binary = binary
        self.stdout = stdout  # None: whatever sys.stdout is when a command runs
        self.stderr = stderr
        self._tf = python_terraform.Terraform(working_dir=str(self.working_dir), terraform_bin_path=binary)
        # An empty dict here makes python-terraform add a temporary `-var-file={}` to every
        # command; None leaves the command line to what each method passes.
        self._tf.variables = None

    # ---- the verbs ----
    def init(self) -> None:
        """terraform init -backend=true -input=false -no-color (downloads providers).

        Never -reconfigure (forgets the state) and never -migrate-state behind the user's back:
        when the backend changed since the last init, refuse and name the command that moves
        the state."""
        try:
            self._streamed("init", lambda **io: self._tf.cmd(
                "init", backend=True, input=False, no_color=IsFlagged, **io))
        except TerraformError as error:
            if any(marker in error.output for marker in BACKEND_CHANGED_MARKERS):
                raise TerraformError(
                    f"the Terraform backend of {self.working_dir} changed since its last init (a new or edited "
                    "backend.tf), and gantry will not start from an empty state",
                    f"Move the state yourself with `terraform -chdir={self.working_dir} init -migrate-state` "
                    "(or undo the backend change), then run the command again.",
                    output=error.output, returncode=error.returncode) from error
            raise

    def plan(self, var_file: str | Path) -> bool:
        """terraform plan; True when the plan has changes (``-detailed-exitcode`` 2)."""
        code = self._streamed("plan", lambda **io: self._tf.cmd(
            "plan", input=False, no_color=IsFlagged, detailed_exitcode=IsFlagged,
            var_file=_absolute(var_file), **io), ok_codes=(0, 2))
        return code == 2

    def apply(self, var_file: str | Path, overrides: dict[str, str] | None = None) -> None:
        """terraform apply -auto-approve -var-file=... [-var=NAME=VALUE ...] (no interactive approval);
        ``overrides`` win over the file's values (gantry.flows.apply's zone after a stock-out). Terraform takes the last
        value a variable gets on the command line, so -var must come after -var-file: python-terraform's apply()
        puts it first (the file's zone won, and a stock-out retried the same zone), cmd() keeps this order."""
        extra = {"var": [f"{name}={value}" for name, value in overrides.items()]} if overrides else {}
        self._streamed("apply", lambda **io: self._tf.cmd(
            "apply", auto_approve=IsFlagged, input=False, no_color=IsFlagged, var_file=_absolute(var_file),
            **extra, **io))

    def destroy(self, var_file: str | Path) -> None:
        """terraform destroy -auto-approve -var-file=... (destroy() would pass -force)."""
        self._streamed("destroy", lambda **io: self._tf.cmd(
            "destroy", auto_approve=IsFlagged, input=False, no_color=IsFlagged,
            var_file=_absolute(var_file), **io))

    def outputs(self) -> dict[str, object]:
        """The root module's outputs as {name: value}; {} before the first apply."""
        out = self._captured("output", json=IsFlagged, no_color=IsFlagged)
        return {name: item["value"] for name, item in json.loads(out or "{}").items()}

    def state_list(self) -> list[str]:
        """Addresses of the resources in state (what is really there after a failed apply)."""
        try:
            out = self._captured("state list", no_color=IsFlagged)
        except TerraformError as error:
            if "No state file was found" in error.output:
                return []
            raise
        return [line for line in out.splitlines() if line.strip()]

    # ---- running ----
    def _check_binary(self) -> None:
        require_binary(self.binary)

    def _captured(self, command: str, *args, **options) -> str:
        self._check_binary()
        code, out, err = self._tf.cmd(command, *args, **options)
        if code != 0:
            raise _failure(command, self.working_dir, code, f"{out}{err}")
        return out

    def _streamed(self, command: str, run, ok_codes=(0,)) -> int:
        """Run ``run(capture_output=False)`` with stdout/stderr teed to the user and to a buffer.

        python-terraform hands ``sys.stdout``/``sys.stderr`` to Popen when output is not
        captured, so both are pointed at pipes for the duration; reader threads copy the
        bytes to the user's streams as they arrive and keep the tail for errors.
        """
        self._check_binary()
        user_out = self.stdout or sys.stdout
        user_err = self.stderr or sys.stderr
        kept = _Tail()
        with _Tee(user_out, kept) as out_pipe, _Tee(user_err, kept) as err_pipe, \
                contextlib.redirect_stdout(out_pipe.writer), contextlib.redirect_stderr(err_pipe.writer):
            code, _, _ = run(capture_output=False)
        if code not in ok_codes:
            raise _failure(command, self.working_dir, code, kept.text())
        return code


def require_binary(binary: str) -> None:
    if shutil.which(binary) is None:
        raise TerraformNotFound(f"terraform not found (looked for {binary!r} on PATH)", INSTALL_HINT)


def check_variables(variables_tf: str | Path, var_file: str | Path,
                    binary: str = "terraform") -> tuple[list[dict], dict[str, object] | None]:
    """Terraform's verdict on a tfvars file, offline: its diagnostics (errors and warnings), and
    every variable's value as Terraform resolves it (the file's, else variables.tf's default,
    converted to the declared type); None for the values when there are errors.

    ``plan`` of a folder holding only a copy of ``variables.tf`` (and the JSON tables beside it
    that its validations read, such as tpu_zones.json) evaluates every type constraint and
    ``validation`` block of infra/ (the rules live there and nowhere else) without providers,
    state or network. An output generated beside it maps each variable to its value, which
    ``show -json`` of the saved plan reads back, so the defaults live in variables.tf alone.
    Both commands take about a tenth of a second each.
    """
    require_binary(binary)
    names = re.findall(r'^variable "([^"]+)"', Path(variables_tf).read_text(), re.MULTILINE)
    with tempfile.TemporaryDirectory(prefix="gantry-tfvars-") as folder:
        shutil.copy(variables_tf, Path(folder) / "variables.tf")
        for table in Path(variables_tf).parent.glob("*.json"):
            shutil.copy(table, Path(folder) / table.name)
        (Path(folder) / "values.tf").write_text(
            'output "values" {\n  value = {\n' + "".join(f"    {name} = var.{name}\n" for name in names) + "  }\n}\n")
        plan = python_terraform.Terraform(working_dir=folder, terraform_bin_path=binary)
        plan.variables = None
        _, out, _ = plan.cmd("plan", input=False, no_color=IsFlagged, json=IsFlagged, lock=False,
                             refresh=False, var_file=_absolute(var_file), out="values.plan")
        records = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
        diagnostics = [record["diagnostic"] for record in records if record.get("type") == "diagnostic"]
        if any(d["severity"] == "error" for d in diagnostics) or not (Path(folder) / "values.plan").is_file():
            return diagnostics, None
        code, shown, err = plan.cmd("show", "values.plan", json=IsFlagged, no_color=IsFlagged)
        if code != 0:
            raise _failure("show", Path(folder), code, f"{shown}{err}")
    return diagnostics, json.loads(shown)["planned_values"]["outputs"]["values"]["value"]


def _failure(command: str, working_dir: Path, code: int, output: str) -> TerraformError:
    return TerraformError(
        f"terraform {command} failed (exit {code}): {error_summary(output)}",
        f"Terraform's full message is above; rerun by hand with terraform -chdir={working_dir} {command}.",
        output=output, returncode=code)


def error_summary(output: str) -> str:
    """The first ``Error: ...`` line Terraform printed, else its last non-empty line."""
    lines = [line.strip(" │╷╵\t") for line in output.splitlines()]
    for line in lines:
        if line.startswith("Error: "):
            return line[len("Error: "):]
    rest = [line for line in lines if line]
    return rest[-1] if rest else "no output"


def _absolute(path: str | Path) -> str:
    # python-terraform runs terraform inside working_dir, so relative paths would be misread.
    return str(Path(path).resolve())


class _Tail:
    """Thread-safe store of the last _KEEP_CHARS characters written to it."""

    def __init__(self):
        self._parts: list[str] = []
        self._size = 0
        self._lock = threading.Lock()

    def add(self, text: str) -> None:
        with self._lock:
            self._parts.append(text)
            self._size += len(text)
            while self._size > _KEEP_CHARS and len(self._parts) > 1:
                self._size -= len(self._parts.pop(0))

    def text(self) -> str:
        with self._lock:
            return "".join(self._parts)


class _Tee:
    """A pipe whose write end goes to a child process; a thread copies what arrives."""

    def __init__(self, user: TextIO, kept: _Tail):
        self.user, self.kept = user, kept

    def __enter__(self):
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace", newline="")
        self._thread = threading.Thread(target=self._copy, daemon=True)
        self._thread.start()
        return self

    def _copy(self) -> None:
        for line in iter(self._reader.readline, ""):
            self.kept.add(line)
            self.user.write(line)
            self.user.flush()

    def __exit__(self, *exc) -> None:
        self.writer.close()  # the child has exited; closing our copy gives the reader EOF
        self._thread.join()
        self._reader.close()
