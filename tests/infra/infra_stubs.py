"""Stub commands for running the rendered node startup script unprivileged on this machine.

The script talks to the world only through curl (metadata server), docker, systemctl, apt-get,
nvidia-smi and nvidia-ctk. These stand-ins record what they were asked into STUB_STATE and
answer from STUB_METADATA, so a test can check what the script did, step by step.
"""

from pathlib import Path

CURL = r"""#!/usr/bin/env bash
method=GET data="" url=""
while [ $# -gt 0 ]; do
    case "$1" in
        -X) method="$2"; shift 2 ;;
        --data|-H) [ "$1" = --data ] && data="$2"; shift 2 ;;
        -*) shift ;;
        *) url="$1"; shift ;;
    esac
done
path="${url#http://metadata.google.internal/computeMetadata/v1/}"
if [ "$method" = PUT ]; then
    printf '%s=%s\n' "$path" "$data" >>"$STUB_STATE/guest-attributes.log"
    exit 0
fi
[ -f "$STUB_METADATA/$path" ] || exit 22
cat "$STUB_METADATA/$path"
"""

DOCKER = r"""#!/usr/bin/env bash
echo "docker $*" >>"$STUB_STATE/commands.log"
case "$1" in
    --version) echo "Docker version 0.0 (stub)" ;;
    info)
        if [ -f "$STUB_STATE/nvidia-runtime" ]; then echo '{"nvidia":{},"runc":{}}'; else echo '{"runc":{}}'; fi ;;
    login) cat >"$STUB_STATE/docker-login-password" ;;
esac
"""

RECORDER = r"""#!/usr/bin/env bash
echo "$(basename "$0") $*" >>"$STUB_STATE/commands.log"
"""

NVIDIA_SMI = r"""#!/usr/bin/env bash
case "$*" in
    *driver_version*) echo "$STUB_DRIVER_VERSION" ;;
    *name,memory.total*) echo "Tesla T4, 15360 MiB" ;;
    *) echo "| NVIDIA-SMI $STUB_DRIVER_VERSION   Driver Version: $STUB_DRIVER_VERSION   CUDA Version: $STUB_DRIVER_CUDA |" ;;
esac
"""

NVIDIA_CTK = r"""#!/usr/bin/env bash
echo "nvidia-ctk $*" >>"$STUB_STATE/commands.log"
case "$1" in
    --version) echo "NVIDIA Container Toolkit CLI version 0.0 (stub)" ;;
    runtime) touch "$STUB_STATE/nvidia-runtime" ;;
esac
"""


def install_stubs(bin_dir: Path, gpu: bool) -> None:
    """Write the stub commands into bin_dir (put it first on PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    stubs = {"curl": CURL, "docker": DOCKER, "systemctl": RECORDER, "apt-get": RECORDER}
    if gpu:
        stubs.update({"nvidia-smi": NVIDIA_SMI, "nvidia-ctk": NVIDIA_CTK})
    for name, body in stubs.items():
        path = bin_dir / name
        path.write_text(body)
        path.chmod(0o755)
