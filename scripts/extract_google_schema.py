#!/usr/bin/env python3
"""Extract hashicorp/google and hashicorp/google-beta 8.7.0's schemas for the offline stand-in provider.

    make standin-schema                       # pip-downloads the wheels once into .cache/, writes both JSONs
    python scripts/extract_google_schema.py --wheel path/to/cdktn_provider_google-21.1.0-py3-none-any.whl
    python scripts/extract_google_schema.py --provider google-beta   # google_beta_schema_8.7.0.json
    python scripts/extract_google_schema.py --check   # exit 1 if the committed JSON is stale

The real provider binary cannot be downloaded here, but PyPI's `cdktn-provider-google` 21.1.0 is
generated from hashicorp/google 8.7.0 and ships its generated JavaScript inside a jsii tarball.
In `package/lib/<resource>/index.js` every class member carries a comment
`// <tf_name> - computed: C, optional: O, required: R`, each `synthesizeHclAttributes()` /
`...ToHclTerraform(struct)` lists every argument with `isBlock`, `type` and `storageClassType`,
and a nested block is a `...OutputReference` (at most one) or a `...List` (repeated). That is
enough to rebuild the schema Terraform sees (`terraform providers schema -json` layout), for the
resources and data sources `infra/` uses plus a fixed list of likely ones. Output is sorted and
deterministic: regenerating from the same wheel and the same infra/ reproduces it byte for byte.
`cdktn-provider-google-beta` 21.1.0 is generated from hashicorp/google-beta 8.7.0 the same way; its
file holds only the types infra/ declares with `provider = google-beta` (TPU VMs are beta-only).
"""

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

# ---------------------------------------------------------------------------
PROVIDER_VERSION = "8.7.0"  # the hashicorp/google and hashicorp/google-beta release whose schema this mirrors
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = ROOT / ".cache" / "tf-standin" / "wheels"
INFRA_DIR = ROOT / "infra"


@dataclass(frozen=True)
class Flavor:
    """One provider (google or google-beta): the PyPI bindings generated from its 8.7.0 release."""

    name: str  # the provider's local name in infra/ (`provider = google-beta` on a resource)
    package: str  # PyPI distribution carrying the generated bindings
    package_version: str  # generated from PROVIDER_VERSION of this provider
    provider_class: str  # the generated class of the provider block
    module_prefix: str  # google's bindings drop "google-" from lib/<dir>, google-beta's keep it
    likely_resources: tuple = ()  # always extracted, whether or not infra/ uses them today
    likely_data_sources: tuple = ()

    @property
    def tarball(self) -> str:
        return f"{self.package.replace('-', '_')}/_jsii/{self.package.removeprefix('cdktn-')}@{self.package_version}.jsii.tgz"

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.package_version}-py3-none-any.whl"

    @property
    def default_out(self) -> Path:
        return ROOT / "tools" / "tf-standin" / f"{self.name.replace('-', '_')}_schema_{PROVIDER_VERSION}.json"


FLAVORS = {
    "google": Flavor(
        "google", "cdktn-provider-google", "21.1.0", "GoogleProvider", "",
        # What a GCE training cluster is likely to need.
        likely_resources=(
            "google_artifact_registry_repository", "google_artifact_registry_repository_iam_member",
            "google_compute_address", "google_compute_disk", "google_compute_firewall", "google_compute_instance",
            "google_compute_instance_template", "google_compute_network", "google_compute_router",
            "google_compute_router_nat", "google_compute_subnetwork", "google_project_iam_member",
            "google_project_service", "google_service_account", "google_storage_bucket",
            "google_storage_bucket_iam_member",
        ),
        likely_data_sources=(
            "google_client_config", "google_compute_default_service_account", "google_compute_image",
            "google_compute_network", "google_compute_subnetwork", "google_compute_zones", "google_project",
        ),
    ),
    # Only what hashicorp/google 8.7.0 lacks: TPU VMs (google_tpu_v2_vm) are beta-only in 8.7.0.
    # Kept small: the resources infra/ declares with `provider = google-beta`, no data sources.
    "google-beta": Flavor("google-beta", "cdktn-provider-google-beta", "21.1.0", "GoogleBetaProvider", "google-",
                          likely_resources=("google_tpu_v2_vm",)),
}
# ---------------------------------------------------------------------------

PRIMITIVE = {"string": "string", "number": "number", "boolean": "bool"}
MEMBER_RE = re.compile(r"^    // (\w+) - computed: (true|false), optional: (true|false), required: (true|false)$", re.MULTILINE)
CLASS_RE = re.compile(r"^class (\w+) extends ([\w.]+) \{$(.*?)^\}$", re.MULTILINE | re.DOTALL)
HCL_ENTRY_RE = re.compile(
    r"(\w+): \{\s*value: [^\n]*\n\s*isBlock: (true|false),\s*type: \"(\w+)\",\s*storageClassType: \"(\w+)\",\s*\}"
)
HCL_FUNC_RE = re.compile(r"^function (\w+)ToHclTerraform\(struct\) \{$(.*?)^\}$", re.MULTILINE | re.DOTALL)
SYNTH_RE = re.compile(r"^    synthesizeHclAttributes\(\) \{$(.*?)^    \}$", re.MULTILINE | re.DOTALL)
NEW_RE = re.compile(r"_\w+ = new ([\w.]+)\(this, \"(\w+)\"(?:, (true|false))?\);")
GETTER_TYPES = {  # computed-only getters -> cty type
    "getStringAttribute": "string", "getNumberAttribute": "number", "getBooleanAttribute": "bool",
    "getListAttribute": ["list", "string"], "getNumberListAttribute": ["list", "number"],
    "getStringMapAttribute": ["map", "string"], "getNumberMapAttribute": ["map", "number"],
    "getBooleanMapAttribute": ["map", "bool"],
}
CDKTN_MAPS = {"cdktn.StringMap": ["map", "string"], "cdktn.NumberMap": ["map", "number"],
              "cdktn.BooleanMap": ["map", "bool"], "cdktn.AnyMap": ["map", "dynamic"]}


class ModuleJs:
    """One generated `index.js`: its classes (members with flags) and its HCL attribute tables."""

    def __init__(self, text: str):
        self.text = text
        self.classes = {m.group(1): (m.group(2), m.group(3)) for m in CLASS_RE.finditer(text)}
        self.hcl = {m.group(1): self._entries(m.group(2)) for m in HCL_FUNC_RE.finditer(text)}

    @staticmethod
    def _entries(body: str) -> dict:
        return {m.group(1): (m.group(2) == "true", m.group(3), m.group(4)) for m in HCL_ENTRY_RE.finditer(body)}

    def members(self, class_name: str) -> list[tuple[str, bool, bool, bool, str]]:
        """(tf_name, computed, optional, required, source chunk) in declaration order."""
        body = self.classes[class_name][1]
        found = list(MEMBER_RE.finditer(body))
        out = []
        for i, m in enumerate(found):
            end = found[i + 1].start() if i + 1 < len(found) else len(body)
            flags = [m.group(k) == "true" for k in (2, 3, 4)]
            out.append((m.group(1), *flags, body[m.end():end]))
        return out

    def top_class(self, tf_type: str) -> str:
        for name, (_base, body) in self.classes.items():
            if f'static tfResourceType = "{tf_type}";' in body:
                return name
        raise SystemExit(f"extract: no class declares tfResourceType {tf_type!r}")


def struct_of_class(class_name: str) -> str:
    return re.sub(r"(OutputReference|List)$", "", class_name)


def hcl_table(js: ModuleJs, class_name: str, top: bool) -> dict:
    if top:
        m = SYNTH_RE.search(js.classes[class_name][1])
        return js._entries(m.group(1)) if m else {}
    struct = struct_of_class(class_name)
    return js.hcl.get(struct[0].lower() + struct[1:], {})


def hcl_attr_type(kind: str, storage: str) -> object:
    if kind == "simple" and storage in PRIMITIVE:
        return PRIMITIVE[storage]
    if kind in ("list", "set") and storage.endswith("List") and storage[:-4] in PRIMITIVE:
        return [kind, PRIMITIVE[storage[:-4]]]
    if kind == "map" and storage.endswith("Map") and storage[:-3] in PRIMITIVE:
        return ["map", PRIMITIVE[storage[:-3]]]
    raise SystemExit(f"extract: unhandled attribute kind {kind}/{storage}; teach hcl_attr_type about it")


def computed_type(js: ModuleJs, chunk: str, name: str) -> object:
    """The type of a computed-only member, read from its getter."""
    new = NEW_RE.search(chunk)
    if new:
        cls, wraps_set = new.group(1), new.group(3) == "true"
        if cls in CDKTN_MAPS:
            return CDKTN_MAPS[cls]
        element = struct_of_class(cls) + "OutputReference"
        obj = ["object", {n: computed_type(js, c, n) for n, *_f, c in js.members(element)}]
        return ["set" if wraps_set else "list", obj]
    getter = re.search(r"return (cdktn\.Fn\.tolist\()?this\.(\w+)\('" + name + r"'\)", chunk)
    if not getter or getter.group(2) not in GETTER_TYPES:
        raise SystemExit(f"extract: cannot type computed member {name!r}: {chunk.strip()[:200]}")
    t = GETTER_TYPES[getter.group(2)]
    return ["set", t[1]] if getter.group(1) else t


def block_schema(js: ModuleJs, class_name: str, top: bool = False) -> dict:
    table = hcl_table(js, class_name, top)
    attributes, block_types = {}, {}
    for name, computed, optional, required, chunk in js.members(class_name):
        flags = {k: True for k, v in (("computed", computed), ("optional", optional), ("required", required)) if v}
        if name in table and table[name][0]:  # a nested block
            _, kind, storage = table[name]
            new = NEW_RE.search(chunk)
            single = new is not None and new.group(1).endswith("OutputReference")
            if kind == "struct":  # the plugin-framework `timeouts` style single block
                nested = {"nesting_mode": "single"}
                child = new.group(1)
            else:
                nested = {"nesting_mode": kind}
                child = struct_of_class(new.group(1)) + "OutputReference"
                # SDKv2 drops min/max on optional+computed blocks: their items may come from the API
                if not (optional and computed):
                    if required:
                        nested["min_items"] = 1
                    if single:
                        nested["max_items"] = 1
            nested["block"] = block_schema(js, child)
            block_types[name] = nested
        elif name in table:
            _, kind, storage = table[name]
            attributes[name] = {"type": hcl_attr_type(kind, storage), **flags}
        else:
            attributes[name] = {"type": computed_type(js, chunk, name), **flags}
    out = {"attributes": attributes}
    if block_types:
        out["block_types"] = block_types
    return out


def provider_schema(js: ModuleJs, dts: str, cls: str) -> dict:
    """The provider block: plain structs, no OutputReference classes, so nested flags come from index.d.ts."""
    table = hcl_table(js, cls, top=True)
    attributes, block_types = {}, {}
    for name, *_flags, _chunk in js.members(cls):
        is_block, kind, storage = table[name]
        if not is_block:
            attributes[name] = {"type": hcl_attr_type(kind, storage), "optional": True}
            continue
        struct = storage.removesuffix("List")
        iface = re.search(r"^export interface " + struct + r" \{$(.*?)^\}$", dts, re.MULTILINE | re.DOTALL).group(1)
        props = dict(re.findall(r"readonly (\w+)(\??):", iface))
        inner = {}
        for attr, (_b, k, s) in hcl_table(js, struct, top=False).items():
            camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), attr)
            inner[attr] = {"type": hcl_attr_type(k, s), "optional" if props.get(camel) == "?" else "required": True}
        block_types[name] = {"nesting_mode": "list", "block": {"attributes": inner}}
    return {"attributes": attributes, "block_types": block_types}


def module_dir(kind: str, tf_type: str, flavor: Flavor) -> str:
    bare = tf_type.removeprefix("google_").replace("_", "-")
    return f"data-google-{bare}" if kind == "data" else flavor.module_prefix + bare


BLOCK_RE = re.compile(r'^(resource|data)\s+"(google_\w+)"\s+"\w+"\s*\{$(.*?)^\}$', re.MULTILINE | re.DOTALL)
BETA_RE = re.compile(r"^\s*provider\s*=\s*google-beta\b", re.MULTILINE)


def types_used_by_infra(infra: Path, flavor: Flavor) -> tuple[set, set]:
    """google_* types infra/ declares for this provider: `provider = google-beta` selects google-beta."""
    resources, data_sources = set(), set()
    for tf in sorted(infra.rglob("*.tf")) if infra.is_dir() else []:
        if ".terraform" in tf.parts:
            continue
        for kind, tf_type, body in BLOCK_RE.findall(tf.read_text()):
            if (flavor.name == "google-beta") == bool(BETA_RE.search(body)):
                (resources if kind == "resource" else data_sources).add(tf_type)
    return resources, data_sources


def find_wheel(wheel: str | None, cache: Path, flavor: Flavor) -> Path:
    if wheel:
        return Path(wheel)
    if not (cache / flavor.wheel_name).exists():
        cache.mkdir(parents=True, exist_ok=True)
        print(f"extract: pip download {flavor.package}=={flavor.package_version} into {cache} (about 70 MB, once)",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache),
                        f"{flavor.package}=={flavor.package_version}"], check=True)
    return cache / flavor.wheel_name


def read_modules(wheel: Path, dirs: set[str], flavor: Flavor) -> dict[str, str]:
    """Stream the jsii tarball once and keep only the index.js/index.d.ts files asked for."""
    wanted = {f"package/lib/{d}/index.js" for d in dirs} | {"package/lib/provider/index.d.ts"}
    found = {}
    with zipfile.ZipFile(wheel) as zf, tarfile.open(fileobj=io.BytesIO(zf.read(flavor.tarball)), mode="r|gz") as tar:
        for member in tar:
            if member.name in wanted:
                found[member.name] = tar.extractfile(member).read().decode()
            elif member.name == "package/package.json":
                version = json.loads(tar.extractfile(member).read())["version"]
                if version != flavor.package_version:
                    raise SystemExit(f"extract: wheel holds {version}, expected {flavor.package_version}")
    missing = wanted - set(found)
    if missing:
        raise SystemExit(f"extract: not in {wheel.name}: {', '.join(sorted(missing))} (a misspelled type in infra/?)")
    return found


def extract(wheel: Path, infra: Path, flavor: Flavor) -> dict:
    used_res, used_data = types_used_by_infra(infra, flavor)
    resources = sorted(set(flavor.likely_resources) | used_res)
    data_sources = sorted(set(flavor.likely_data_sources) | used_data)
    dirs = {module_dir("resource", r, flavor) for r in resources} | {module_dir("data", d, flavor) for d in data_sources}
    files = read_modules(wheel, dirs | {"provider"}, flavor)

    def schema_of(kind, tf_type):
        js = ModuleJs(files[f"package/lib/{module_dir(kind, tf_type, flavor)}/index.js"])
        return {"block": block_schema(js, js.top_class(tf_type), top=True)}

    provider_js = ModuleJs(files["package/lib/provider/index.js"])
    return {
        "format": "terraform providers schema -json layout, one provider; written by scripts/extract_google_schema.py",
        "source": {"package": flavor.package, "version": flavor.package_version, "member": flavor.tarball},
        "provider_source": f"registry.terraform.io/hashicorp/{flavor.name}",
        "provider_version": PROVIDER_VERSION,
        "provider": {"block": provider_schema(provider_js, files["package/lib/provider/index.d.ts"],
                                              flavor.provider_class)},
        "resource_schemas": {r: schema_of("resource", r) for r in resources},
        "data_source_schemas": {d: schema_of("data", d) for d in data_sources},
    }


def render(schema: dict) -> str:
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--provider", choices=sorted(FLAVORS), default="google",
                    help="google (cdktn-provider-google) or google-beta (cdktn-provider-google-beta)")
    ap.add_argument("--wheel", help="a local wheel of the provider's package (default: pip download into --cache)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the downloaded wheel is kept")
    ap.add_argument("--infra", type=Path, default=INFRA_DIR, help="Terraform tree whose google_* types are added")
    ap.add_argument("--out", type=Path, help="the committed schema JSON (default: tools/tf-standin/<provider>_schema_8.7.0.json)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if --out differs")
    args = ap.parse_args(argv)
    flavor = FLAVORS[args.provider]
    args.out = args.out or flavor.default_out
    text = render(extract(find_wheel(args.wheel, args.cache, flavor), args.infra, flavor))
    if args.check:
        if not args.out.exists() or args.out.read_text() != text:
            print(f"extract: {args.out} is stale; run `make standin-schema`", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"extract: wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out} "
          f"({len(text) // 1024} KiB)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
