#!/usr/bin/env python3
"""Install the stand-in google and google-beta providers into a filesystem mirror and write the CLI config that uses them.

    python3 tools/tf-standin/mirror.py /tmp/standin      # prints the export to run terraform with it
    eval "$(python3 tools/tf-standin/mirror.py /tmp/standin)"; terraform -chdir=<copy of infra> init

Never on a user's default path: only a TF_CLI_CONFIG_FILE that names this mirror (tests set it per
process) makes Terraform pick the stand-in, and only for registry.terraform.io/hashicorp/google and
hashicorp/google-beta (the latter serves only what infra/ takes from it: google_tpu_v2_vm).
The provider runs in its own tool virtualenv (.cache/tf-standin/venv), created here on first use,
because the `tf` framework pins protobuf < 6 while the trainer's tensorboard needs protobuf >= 6.31.
"""

import argparse
import fcntl
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = ROOT / ".cache" / "tf-standin" / "venv"
REQUIREMENTS = ["tf==1.2.0"]  # the go-plugin handshake and tfplugin6 protobuf
VERSION = "8.7.0"
PROVIDERS = ("google", "google-beta")  # each serves tools/tf-standin/<name>_schema_8.7.0.json
SOURCES = [f"registry.terraform.io/hashicorp/{name}" for name in PROVIDERS]
PLATFORM = "linux_amd64"


def ensure_venv(venv: Path = VENV) -> Path:
    """The tool venv's python, creating the venv once (a few seconds from PyPI's cache)."""
    python = venv / "bin" / "python"
    stamp = venv / f".installed-{'_'.join(REQUIREMENTS)}"  # a new pin makes a fresh install
    if stamp.exists():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / "venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two pytest processes must not build it at once
        if not stamp.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *REQUIREMENTS],
                           check=True)
            stamp.touch()
    return python


def install(mirror: Path, python: Path, name: str = "google") -> Path:
    """Write <mirror>/registry.terraform.io/hashicorp/NAME/8.7.0/linux_amd64/terraform-provider-NAME_v8.7.0."""
    target = mirror / f"registry.terraform.io/hashicorp/{name}" / VERSION / PLATFORM / f"terraform-provider-{name}_v{VERSION}"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(
        f"#!{python}\n"
        "# The offline stand-in for hashicorp/google (tools/tf-standin); never a real provider.\n"
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import standin_google\n"
        f"standin_google.main({name!r})\n"
    )
    target.chmod(0o755)
    return target


def write_cli_config(path: Path, mirror: Path) -> Path:
    sources = ", ".join(f'"{s}"' for s in SOURCES)
    path.write_text(
        "# Test-only: hashicorp/google and google-beta come from the stand-in mirror, everything else as usual.\n"
        "provider_installation {\n"
        "  filesystem_mirror {\n"
        f'    path    = "{mirror}"\n'
        f"    include = [{sources}]\n"
        "  }\n"
        "  direct {\n"
        f"    exclude = [{sources}]\n"
        "  }\n"
        "}\n"
    )
    return path


def prepare(workdir: Path) -> dict:
    """Mirror + CLI config under workdir; returns the environment variables terraform needs."""
    mirror = workdir / "mirror"
    python = ensure_venv()
    for name in PROVIDERS:
        install(mirror, python, name)
    config = write_cli_config(workdir / "standin.tfrc", mirror)
    return {"TF_CLI_CONFIG_FILE": str(config), "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdir", type=Path, help="where the mirror and standin.tfrc go (created)")
    args = ap.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    for key, value in prepare(args.workdir.resolve()).items():
        print(f"export {key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
