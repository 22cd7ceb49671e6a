#!/bin/sh
# Installs torch into /opt/venv for an image flavour and proves it is that flavour, so a CPU or TPU image
# never carries CUDA libraries and a CUDA image holds exactly the CUDA docker/torch.json names (the CUDA that
# infra's boot check requires of the node's driver).
#   install_torch.sh cpu|cuda [TORCH_SPEC [TORCH_INDEX_URL]]   (empty: torch==<torch.json's torch> from its index)
#   install_torch.sh tpu REQUIREMENTS_FILE [TORCH_INDEX_URL]   (torch + torch_xla pins; libtpu comes with torch-xla[tpu])
# Its folder (/tmp/build) also holds torch.json, torch_pins.py, the build's extra CA certificates (*.crt) and
# local wheels (*.whl).
set -eu
flavour="$1"
spec="${2:-}"
build="$(dirname "$0")"
pins() { python3 "$build/torch_pins.py" "$@"; }
[ -n "$spec" ] || spec="torch==$(pins get torch)"
pip=/opt/venv/bin/pip
if [ "$flavour" = tpu ]; then
    # torch_xla loads only beside the torch it was built for: both from the one file that pins them, and
    # torch-xla's [tpu] extra for libtpu, the TPU runtime of that release
    set -- -r "$spec" "torch-xla[tpu]"
    spec="$(grep -v '^#' "$spec" | tr '\n' ' ')"
else
    set -- "$spec"
fi

# Extra CAs (a TLS-intercepting proxy's) join the system bundle that pip (PIP_CERT) and the image use.
for cert in "$build"/*.crt; do
    if [ -e "$cert" ]; then cp "$cert" /usr/local/share/ca-certificates/; fi
done
update-ca-certificates >/dev/null 2>&1
python3 -m venv /opt/venv

if ls "$build"/torch-*.whl >/dev/null 2>&1; then
    # A local torch wheel: its dependencies come from PIP_INDEX_URL; torch's own index is never asked.
    local_torch="$(cd "$build" && ls torch-*.whl)"
    case "$flavour:$local_torch" in  # refuse the wrong flavour before spending minutes installing it
        cuda:*+cpu*) echo "install_torch: the CUDA image got a CPU-only torch wheel ($local_torch in WHEEL_DIR): use a +cu wheel or none" >&2; exit 1 ;;
        cpu:*+cu*|tpu:*+cu*) echo "install_torch: the $flavour image got a CUDA torch wheel ($local_torch in WHEEL_DIR): use a +cpu wheel or none" >&2; exit 1 ;;
    esac
    echo "install_torch: $spec from the local wheels: $local_torch"
    "$pip" install --find-links "$build" "$@"
else
    # The flavour's index from torch.json (TORCH_INDEX_URL overrides); a CPU index out of reach stops here in
    # one line, since PyPI's Linux torch, the fallback pip would take, is the CUDA build.
    index="$(TORCH_INDEX_URL="${3:-}" python3 "$build/torch_pins.py" index "$flavour")"
    echo "install_torch: $spec from $index"
    "$pip" install --find-links "$build" --index-url "$index" --extra-index-url "${PIP_INDEX_URL:-https://pypi.org/simple}" "$@"
fi
rm -f "$build"/*.whl   # the wheels are in the venv now; this layer need not carry them twice
# libtorch's C++ unit-test binaries (~80 MB): nothing imports them.
rm -rf /opt/venv/lib/python3*/site-packages/torch/test

/opt/venv/bin/python - "$flavour" "$build/torch.json" <<'PY'
import json
import sys
from importlib import metadata

import torch

flavour = sys.argv[1]
pinned_cuda = json.load(open(sys.argv[2]))["cuda"]
nvidia = sorted(d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].lower().startswith("nvidia-"))
if flavour in ("cpu", "tpu") and (torch.version.cuda is not None or nvidia):
    sys.exit(f"install_torch: the {flavour.upper()} image got a CUDA torch ({torch.__version__}, CUDA "
             f"{torch.version.cuda}, {len(nvidia)} nvidia-* packages): use a +cpu wheel in WHEEL_DIR or "
             f"TORCH_INDEX_URL=.../whl/cpu")
if flavour == "tpu":
    import torch_xla  # a torch_xla built for another torch fails right here, at build time

    print(f"install_torch: torch_xla {metadata.version('torch-xla')}, libtpu {metadata.version('libtpu')}")
if flavour == "cuda" and torch.version.cuda is None:
    sys.exit(f"install_torch: the CUDA image got a CPU-only torch ({torch.__version__}): leave TORCH_INDEX_URL at "
             f"docker/torch.json's cuda_index_url and keep +cpu wheels out of WHEEL_DIR")
# The one fact: infra requires this CUDA of the node's driver (docker/torch.json), so the image must carry it.
if flavour == "cuda" and ".".join(torch.version.cuda.split(".")[:2]) != pinned_cuda:
    sys.exit(f"install_torch: the CUDA image got torch {torch.__version__} built for CUDA {torch.version.cuda}, but "
             f"docker/torch.json says cuda {pinned_cuda} (what the nodes' boot check requires): change cuda, "
             f"torch and cuda_index_url there together, or build with the torch it names")
print(f"install_torch: torch {torch.__version__} (CUDA {torch.version.cuda}), {len(nvidia)} nvidia-* packages")
PY
