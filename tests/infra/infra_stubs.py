"""Stub commands for running the rendered node startup script unprivileged on this machine.

The script talks to the world only through curl (metadata server), docker, systemctl, apt-get,
apt-mark, dpkg-query, uname, nvidia-smi, nvidia-ctk and sleep (a cloud-init stub records any call to it:
the script must make none). These stand-ins record what they were asked into
STUB_STATE and answer from STUB_METADATA, so a test can check what the script did, step by step.

A busy first boot is played in virtual time: `sleep` adds its seconds to STUB_STATE/clock and
returns at once; a command installed "later" (docker by `apt-get install docker.io`, nvidia-smi
once the clock reaches STUB_NVIDIA_AT_SECONDS) waits in bin/.later until then. `apt-get update`
fails its first STUB_APT_LOCKED_TIMES calls the way apt does while another process holds the lock.
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

# apt 2.x's own words when apt-daily, unattended-upgrades or cloud-init holds the lists lock.
APT_LOCKED = (
    "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1234 (apt-get)\n"
    "N: Be aware that removing the lock file is not a solution and may break your system.\n"
    "E: Unable to lock directory /var/lib/apt/lists/\n"
)

APT_GET = r"""#!/usr/bin/env bash
echo "apt-get $*" >>"$STUB_STATE/commands.log"
bin="$(dirname "$0")"
case " $* " in
    *" update "*)
        echo x >>"$STUB_STATE/apt-update-calls"
        if [ "$(wc -l <"$STUB_STATE/apt-update-calls")" -le "${STUB_APT_LOCKED_TIMES:-0}" ]; then
            echo "Reading package lists..."
            printf '%b' "$STUB_APT_LOCKED" >&2
            exit 100
        fi ;;
    *" install "*)
        case " $* " in *" docker.io "*) [ -f "$bin/.later/docker" ] && mv "$bin/.later/docker" "$bin/docker" ;; esac ;;
esac
exit 0
"""

SLEEP = r"""#!/usr/bin/env bash
echo "sleep $*" >>"$STUB_STATE/commands.log"
clock=$(( $(cat "$STUB_STATE/clock" 2>/dev/null || echo 0) + $1 ))
echo "$clock" >"$STUB_STATE/clock"
bin="$(dirname "$0")"
if [ -n "${STUB_NVIDIA_AT_SECONDS:-}" ] && [ "$clock" -ge "$STUB_NVIDIA_AT_SECONDS" ] && [ -f "$bin/.later/nvidia-smi" ]; then
    mv "$bin/.later/nvidia-smi" "$bin/nvidia-smi"
fi
"""

NVIDIA_SMI = r"""#!/usr/bin/env bash
if [ -n "${STUB_NVIDIA_NO_MODULE:-}" ]; then  # nvidia-smi's words when the module is not loaded (#25)
    echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
    exit 9
fi
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


# The kernel the node booted (`uname -r`), and dpkg-query's `${db:Status-Abbrev} ${Package}` lines for
# linux-* on an Ubuntu 22.04 GCE image that also keeps an older kernel and the config of a removed one.
KERNEL = "6.8.0-1015-gcp"
DPKG_LINUX = "\n".join([
    "ii  linux-base", "ii  linux-gcp", "ii  linux-headers-gcp", "ii  linux-image-gcp",
    f"ii  linux-image-{KERNEL}", f"ii  linux-headers-{KERNEL}", f"ii  linux-modules-{KERNEL}",
    "ii  linux-gcp-6.8-headers-6.8.0-1015", "ii  linux-image-6.5.0-1010-gcp", "rc  linux-image-6.2.0-1019-gcp",
    "un  linux-generic",
])

UNAME = r"""#!/usr/bin/env bash
[ "$1" = -r ] && { echo "${STUB_KERNEL:-%s}"; exit 0; }
exec /bin/uname "$@"
""" % KERNEL

DPKG_QUERY = r"""#!/usr/bin/env bash
echo "dpkg-query $*" >>"$STUB_STATE/commands.log"
printf '%%b\n' "${STUB_DPKG_LINUX:-%s}"
""" % DPKG_LINUX.replace("\n", "\\n")


def install_stubs(bin_dir: Path, gpu: bool, docker_installed: bool = True, driver_installed: bool = True) -> None:
    """Write the stub commands into bin_dir (put it first on PATH). docker_installed=False leaves docker
    for `apt-get install docker.io`; driver_installed=False leaves nvidia-smi for later (the clock)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    later = bin_dir / ".later"
    later.mkdir(exist_ok=True)
    stubs = {"curl": CURL, "docker": DOCKER, "systemctl": RECORDER, "apt-get": APT_GET, "cloud-init": RECORDER,
             "sleep": SLEEP, "apt-mark": RECORDER, "dpkg-query": DPKG_QUERY, "uname": UNAME}
    if gpu:
        stubs.update({"nvidia-smi": NVIDIA_SMI, "nvidia-ctk": NVIDIA_CTK})
    for name, body in stubs.items():
        installed = not (name == "docker" and not docker_installed or name == "nvidia-smi" and not driver_installed)
        path = (bin_dir if installed else later) / name
        path.write_text(body)
        path.chmod(0o755)
