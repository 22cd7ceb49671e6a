"""The user's deployment settings, read from infra/terraform.tfvars.

Terraform is the source of truth; gantry reads the same file so that preflight, cost
and the post-destroy inventory check exactly what `terraform apply` will create. The
variable names and defaults mirror infra/variables.tf.

The parser reads the tfvars subset people write by hand: ``key = value`` lines with
strings, numbers and booleans, ``#`` and ``//`` comments, and lists of strings (fallback_zones).
Maps and heredocs (e.g. extra labels) are skipped, not rejected: gantry never needs them and
Terraform reads them.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path

from gantry.errors import ConfigError

DEFAULT_INFRA_DIR = Path("infra")
LABEL_KEY = "gantry-deployment"  # every resource infra/ creates carries it

# The trainer's time budget (selfplay's run.max_minutes) of a run that `gantry run` starts without one, so
# a forgotten run ends by itself, with a checkpoint, well before max_run_hours (infra/variables.tf) powers
# the nodes off. `gantry run -- --run.max_minutes=N` overrides it; N = 0 removes it.
DEFAULT_RUN_MAX_MINUTES = 240
RUN_MAX_MINUTES_FLAG = "--run.max_minutes"


@dataclass(frozen=True)
class Deployment:
    project_id: str
    region: str = "us-central1"
    zone: str = "us-central1-a"
    fallback_zones: tuple[str, ...] = ()  # where `make apply` moves on a stock-out in zone (gantry.cli.apply)
    deployment_name: str = "gantry"
    use_gpu: bool = False  # false: C4 CPU nodes; true: N1 + NVIDIA T4 nodes
    node_count: int = 1  # 1 = single node; master + workers beyond
    cpu_machine_type: str = "c4-highcpu-16"
    gpu_machine_type: str = "n1-standard-8"
    accelerator_type: str = "nvidia-tesla-t4"
    accelerator_count: int = 1  # GPUs per node
    spot: bool = False  # Spot VMs: ~40-60% cheaper, can be preempted with 30 s notice
    max_run_hours: float = 6  # GCE deletes/stops the VM after this long (the agent stops a TPU node); 0 = no limit
    termination_action: str = "STOP"  # what GCE does at max_run_hours or a preemption: STOP or DELETE
    idle_shutdown_minutes: int = 60  # the node agent powers an idle node off (stops a TPU node); 0 = never
    boot_disk_size_gb: int = 100
    cpu_image: str = "ubuntu-os-cloud/ubuntu-2404-lts-amd64"  # PROJECT/FAMILY (preflight: trusted image projects)
    gpu_image_project: str = "deeplearning-platform-release"
    gpu_image_family: str = "common-cu129-ubuntu-2204-nvidia-580"
    use_tpu: bool = False  # one Cloud TPU VM (tpu_type) instead of the C4/N1 nodes (infra/tpu.tf)
    tpu_type: str = "v3-8"  # single-host TPU VM type; infra/tpu_zones.json lists the zones of each

    @property
    def image_project(self) -> str:
        return self.gpu_image_project if self.use_gpu else self.cpu_image.split("/")[0]

    @property
    def image_family(self) -> str:
        return self.gpu_image_family if self.use_gpu else self.cpu_image.split("/")[-1]

    @property
    def machine_type(self) -> str:
        return self.gpu_machine_type if self.use_gpu else self.cpu_machine_type

    @property
    def labels_filter(self) -> str:
        """The Compute list filter that selects this deployment's resources."""
        return f'labels.{LABEL_KEY} = "{self.deployment_name}"'

    @property
    def shape(self) -> str:
        """One node as the messages name it: c4-highcpu-16, or n1-standard-8 + 1 x nvidia-tesla-t4."""
        return self.machine_type + (f" + {self.accelerator_count} x {self.accelerator_type}" if self.use_gpu else "")

    def describe(self) -> str:
        kind = "Spot" if self.spot else "on-demand"
        node = f"{self.tpu_type} TPU VM" if self.use_tpu else self.shape
        return f"{self.node_count} x {node} ({kind}) in {self.zone}, project {self.project_id}"


def load(path: Path, infra_dir: Path | None = None) -> Deployment:
    """Read a tfvars file into a Deployment, once Terraform's own rules accept it (see check)."""
    path = Path(path)
    check(path, infra_dir)
    values = parse_tfvars(path.read_text(), str(path))
    known = {f.name: f for f in fields(Deployment)}
    settings = {k: _coerce(k, v, known[k].type, path) for k, v in values.items() if k in known and v is not None}
    return Deployment(**settings)


def check(path: Path, infra_dir: Path | None = None) -> None:
    """Refuse a tfvars file that `terraform plan` would refuse, in one line that names the fix.

    The rules are infra/variables.tf's types and validation blocks, evaluated by Terraform
    itself (terraform.check_variables), so gantry and Terraform cannot disagree. A setting
    infra/ does not declare is refused too: Terraform only warns, and a misspelt key
    (use_gpus = true) would silently deploy the default.
    """
    from gantry import terraform

    path = Path(path)
    if not path.is_file():
        example = path.with_name("terraform.tfvars.example")
        found = f"{path} is a folder, not a file" if path.is_dir() else f"{path} not found"
        raise ConfigError(found, f"Copy {example} to {path} and set project_id (cp {example} {path}).")
    variables_tf = Path(infra_dir or path.parent) / "variables.tf"
    if not variables_tf.is_file():
        raise ConfigError(f"{variables_tf} not found, so {path} cannot be checked",
                          "Pass --infra-dir the Terraform root module (the repository's infra/).")
    diagnostics = terraform.check_variables(variables_tf, path)
    errors = sorted((d for d in diagnostics if d["severity"] == "error"),
                    key=lambda d: d.get("range", {}).get("start", {}).get("line", 0))
    if errors:
        raise _diagnostic_error(errors, path)
    declared = {name for tf in variables_tf.parent.glob("*.tf")
                for name in re.findall(r'^variable "([^"]+)"', tf.read_text(), re.MULTILINE)}
    for diagnostic in diagnostics:
        unknown = re.search(r'declare a variable named "([^"]+)"', diagnostic["detail"])
        if diagnostic["summary"] == "Value for undeclared variable" and unknown and unknown.group(1) not in declared:
            name = unknown.group(1)
            close = difflib.get_close_matches(name, sorted(declared), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"{path} sets {name}, which is not a setting of {variables_tf.parent}",
                              f"{hint.capitalize()}Fix or remove the line ({variables_tf} lists every setting).")


def _diagnostic_error(errors: list[dict], path: Path) -> ConfigError:
    first = errors[0]
    if first["summary"] == "No value for required variable":
        return ConfigError(f"{path} does not set project_id",
                           f'Add a line such as project_id = "my-project" to {path} '
                           "(gcloud projects list shows yours).")
    line = first.get("range", {}).get("start", {}).get("line")
    code = (first.get("snippet") or {}).get("code", "").strip()
    what = f"{path}:{line}: {code}" if line and code else f"{path}: {first['summary'].lower()}"
    fix = first["detail"].split("\n\n")[0].replace("\n", " ")
    fix = re.sub(r"The given value is not suitable for var\.(\w+) declared at \S+: ", r"\1: ", fix)
    if len(errors) > 1:
        others = [str(e.get("range", {}).get("start", {}).get("line", "?")) for e in errors[1:]]
        what += f" (and {len(others)} more problem{'s' if len(others) > 1 else ''}, line {', '.join(others)})"
    return ConfigError(what, fix if fix.endswith(".") else fix + ".")


# Terraform converts "3" to 3 and "true" to true for number and bool variables; so does gantry.
_TYPES = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}


def _coerce(name, value, type_name, path):
    kind = str(type_name)
    if kind.startswith("tuple"):  # a list of strings; Terraform has checked its type (check)
        return tuple(str(item) for item in value)
    if isinstance(value, str) and kind == "bool" and value in ("true", "false"):
        return value == "true"
    if isinstance(value, str) and kind in ("int", "float") and _NUMBER.match(value):
        value = float(value) if any(c in value for c in ".eE") else int(value)
    allowed = _TYPES[kind]
    if isinstance(value, bool) and bool not in allowed:
        allowed = ()  # true/false is not a number
    if not isinstance(value, allowed):
        wanted = {"str": "a quoted string", "bool": "true or false"}.get(kind, "a number")
        raise ConfigError(f"{name} = {json.dumps(value)} in {path}", f"{name} must be {wanted}.")
    return value


_ASSIGN = re.compile(r"^\s*([A-Za-z_][\w-]*)\s*=\s*(.*)$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")


def parse_tfvars(text: str, source: str = "terraform.tfvars") -> dict[str, object]:
    """Parse ``key = value`` lines. Lists of strings map to lists; maps and heredocs to None."""
    values: dict[str, object] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        lineno, line = i + 1, _strip_comment(lines[i]).strip()
        i += 1
        if not line:
            continue
        match = _ASSIGN.match(line)
        if not match:
            raise ConfigError(f"{source}:{lineno}: cannot read {line!r}",
                              'Write one setting per line as key = value (strings in "double quotes").')
        key, raw = match.group(1), match.group(2).strip()
        if raw[:1] in "[{" or raw.startswith("<<"):
            end = _skip_block(lines, i, raw)
            values[key] = _string_list([raw, *lines[i:end]]) if raw.startswith("[") else None
            i = end
            continue
        values[key] = _scalar(raw, f"{source}:{lineno}", key)
    return values


def _scalar(raw: str, where: str, key: str):
    if raw.startswith('"'):
        try:
            return json.loads(raw)  # HCL's string escapes are JSON's for the cases that matter
        except json.JSONDecodeError:
            raise ConfigError(f"{where}: {key} has an unterminated or malformed string {raw}",
                              'Close the string with a double quote: key = "value".') from None
    if raw in ("true", "false"):
        return raw == "true"
    if _NUMBER.match(raw):
        return float(raw) if any(c in raw for c in ".eE") else int(raw)
    raise ConfigError(f"{where}: cannot read the value of {key}: {raw}",
                      'Use a quoted string, a number, or true/false (e.g. zone = "us-central1-a").')


def _string_list(block: list[str]) -> list[str] | None:
    """A list of strings and numbers written over one or more lines (HCL allows a trailing comma), else None."""
    text = re.sub(r",\s*]", "]", " ".join(_strip_comment(line) for line in block))
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    ok = isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value)
    return value if ok else None


def _strip_comment(line: str) -> str:
    """Drop # and // comments that are outside double-quoted strings."""
    in_string = escaped = False
    for pos, char in enumerate(line):
        if in_string:
            escaped = char == "\\" and not escaped
            if char == '"' and not escaped:
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "#" or line.startswith("//", pos):
            return line[:pos]
    return line


def _skip_block(lines: list[str], i: int, first: str) -> int:
    """Return the index after a list/map/heredoc that started on the previous line."""
    if first.startswith("<<"):
        marker = first.lstrip("<-").strip()
        while i < len(lines) and lines[i].strip() != marker:
            i += 1
        return i + 1
    depth = _depth(first)
    while depth > 0 and i < len(lines):
        depth += _depth(_strip_comment(lines[i]))
        i += 1
    return i


def _depth(text: str) -> int:
    text = re.sub(r'"(\\.|[^"\\])*"', "", text)
    return text.count("[") + text.count("{") - text.count("]") - text.count("}")
