"""The user's deployment settings, read from infra/terraform.tfvars by Terraform itself.

Terraform is the source of truth; gantry reads the same file so that preflight, cost
and the post-destroy inventory check exactly what `terraform apply` will create. The
file is never parsed here: ``terraform plan`` of infra/variables.tf (terraform.check_variables)
checks it against the types and validation blocks and returns every variable's value, the
file's or variables.tf's default, so each default and rule is written once, in variables.tf.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, fields
from pathlib import Path

from gantry.errors import ConfigError

DEFAULT_INFRA_DIR = Path("infra")
LABEL_KEY = "gantry-deployment"  # every resource infra/ creates carries it

# The time limit of every launch `gantry run` starts (RunSpec.max_minutes), whatever program it runs: the nodes'
# agents stop it then (SIGTERM, the grace to checkpoint, its --sync folders' last copy) and record its end, so a
# forgotten run ends by itself well before max_run_hours (infra/variables.tf) powers the nodes off, and no verb starts
# its nodes again. `gantry run --max-minutes N` changes it; N = 0 removes it.
DEFAULT_RUN_MAX_MINUTES = 240
MAX_MINUTES_FLAG = "--max-minutes"


@dataclass(frozen=True)
class Deployment:
    """The infra/ variables gantry reads, as Terraform resolved them (load); no defaults here: they are
    infra/variables.tf's, which also says what each setting means."""
    project_id: str
    region: str
    zone: str
    fallback_zones: tuple[str, ...]  # where `make apply` moves on a stock-out in zone (gantry.flows.apply)
    deployment_name: str
    use_gpu: bool  # false: C4 CPU nodes; true: GPU nodes (infra/gpu_shapes.json: T4 on N1, L4 on G2, A100 on A2, H100 on A3)
    node_count: int  # 1 = single node; master + workers beyond
    cpu_machine_type: str
    gpu_machine_type: str  # "": the one gpu_shapes.json lists first for the GPUs (machine_type)
    accelerator_type: str
    accelerator_count: int  # GPUs per node
    spot: bool
    max_run_hours: float  # 0 = no limit
    termination_action: str  # what GCE does at max_run_hours or a preemption: STOP or DELETE
    idle_shutdown_minutes: int  # the node agent powers an idle node off (stops a TPU node); 0 = never
    boot_disk_size_gb: int
    cpu_image: str  # PROJECT/FAMILY (preflight: trusted image projects)
    gpu_image_project: str
    gpu_image_family: str
    use_tpu: bool  # one Cloud TPU VM (tpu_type) instead of the C4/N1 nodes (infra/tpu.tf)
    tpu_type: str  # single-host TPU VM type; infra/tpu_zones.json lists the zones of each

    @property
    def image_project(self) -> str:
        return self.gpu_image_project if self.use_gpu else self.cpu_image.split("/")[0]

    @property
    def image_family(self) -> str:
        return self.gpu_image_family if self.use_gpu else self.cpu_image.split("/")[-1]

    @property
    def machine_type(self) -> str:
        if not self.use_gpu:
            return self.cpu_machine_type
        from gantry import gpu_shapes

        return gpu_shapes.machine_type(self.accelerator_type, self.accelerator_count, self.gpu_machine_type)

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
    """The Deployment a tfvars file (or .tfvars.json) describes, once Terraform's own rules accept it (see check)."""
    values = check(Path(path), infra_dir)
    settings = {f.name: values[f.name] for f in fields(Deployment)}
    return Deployment(**{**settings, "fallback_zones": tuple(settings["fallback_zones"])})


def check(path: Path, infra_dir: Path | None = None) -> dict[str, object]:
    """Refuse a tfvars file that `terraform plan` would refuse, in one line that names the fix;
    return every variable's value as Terraform resolved it (defaults included, typed).

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
    diagnostics, values = terraform.check_variables(variables_tf, path)
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
    if values is None:  # no error diagnostic, yet no plan: say what Terraform said
        said = "; ".join(d["summary"] for d in diagnostics) or "no diagnostics"
        raise ConfigError(f"terraform could not read {path} ({said})",
                          f"Run terraform -chdir={variables_tf.parent} plan -var-file={path.resolve()} to see why.")
    return values


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
