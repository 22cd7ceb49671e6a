"""The extracted hashicorp/google and google-beta 8.7.0 schemas: where they come from, that they are
reproducible, that the stand-in serves exactly them, and that every argument infra/ sets exists in
the schema of the provider it uses (google-beta for the TPU VM) with the type infra/ gives it."""

import json
import re
import subprocess
import sys

import pytest
from standin_tools import REPO

SCHEMA_FILE = REPO / "tools" / "tf-standin" / "google_schema_8.7.0.json"
BETA_SCHEMA_FILE = REPO / "tools" / "tf-standin" / "google_beta_schema_8.7.0.json"
SCHEMA_FILES = {"google": SCHEMA_FILE, "google-beta": BETA_SCHEMA_FILE}
EXTRACTOR = REPO / "scripts" / "extract_google_schema.py"
PY_TYPES = {"string": str, "number": (int, float), "bool": bool}


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA_FILE.read_text())


@pytest.fixture(scope="module")
def beta_schema():
    return json.loads(BETA_SCHEMA_FILE.read_text())


@pytest.fixture(scope="module")
def schemas(schema, beta_schema):
    """Provider local name -> its schema; a resource with `provider = google-beta` is checked against beta's."""
    return {"google": schema, "google-beta": beta_schema}


def provider_of(resource: dict) -> str:
    """google or google-beta, from a plan JSON configuration resource's provider_config_key."""
    return resource.get("provider_config_key", "google").split(".")[0].split(":")[-1]


def test_schema_records_its_source_and_the_provider_version(schema):
    assert schema["source"] == {"package": "cdktn-provider-google", "version": "21.1.0",
                                "member": "cdktn_provider_google/_jsii/provider-google@21.1.0.jsii.tgz"}
    assert schema["provider_version"] == "8.7.0"
    assert schema["provider_source"] == "registry.terraform.io/hashicorp/google"
    instance = schema["resource_schemas"]["google_compute_instance"]["block"]
    assert instance["attributes"]["machine_type"] == {"type": "string", "required": True}
    assert instance["attributes"]["cpu_platform"] == {"type": "string", "computed": True}
    assert instance["block_types"]["network_interface"]["nesting_mode"] == "list"
    assert instance["block_types"]["boot_disk"]["min_items"] == instance["block_types"]["boot_disk"]["max_items"] == 1
    # v8: guest_accelerator is a real list block (no `guest_accelerator = []` attribute syntax).
    assert "guest_accelerator" in instance["block_types"] and "guest_accelerator" not in instance["attributes"]


def test_beta_schema_records_its_source_and_holds_only_the_tpu_vm(beta_schema, schema):
    assert beta_schema["source"] == {"package": "cdktn-provider-google-beta", "version": "21.1.0",
                                     "member": "cdktn_provider_google_beta/_jsii/provider-google-beta@21.1.0.jsii.tgz"}
    assert beta_schema["provider_version"] == "8.7.0"
    assert beta_schema["provider_source"] == "registry.terraform.io/hashicorp/google-beta"
    # Small on purpose: only what GA 8.7.0 lacks and infra/ takes from google-beta.
    assert set(beta_schema["resource_schemas"]) == {"google_tpu_v2_vm"} and beta_schema["data_source_schemas"] == {}
    assert "google_tpu_v2_vm" not in schema["resource_schemas"], "google_tpu_v2_vm is beta-only in 8.7.0"
    tpu = beta_schema["resource_schemas"]["google_tpu_v2_vm"]["block"]
    assert tpu["attributes"]["runtime_version"] == {"type": "string", "required": True}
    assert tpu["block_types"]["network_config"]["block"]["attributes"]["enable_external_ips"] == {"type": "bool",
                                                                                                  "optional": True}
    assert tpu["block_types"]["scheduling_config"]["block"]["attributes"]["spot"] == {"type": "bool", "optional": True}


def test_schema_covers_every_google_type_infra_uses(schemas):
    for tf in (REPO / "infra").rglob("*.tf"):
        if ".terraform" in tf.parts:
            continue
        for kind, tf_type, body in re.findall(r'^(resource|data)\s+"(google_\w+)"\s+"\w+"\s*\{$(.*?)^\}$', tf.read_text(),
                                              re.MULTILINE | re.DOTALL):
            provider = "google-beta" if re.search(r"^\s*provider\s*=\s*google-beta\b", body, re.MULTILINE) else "google"
            section = "resource_schemas" if kind == "resource" else "data_source_schemas"
            assert tf_type in schemas[provider][section], f"{tf.name}: {tf_type} ({provider}); run `make standin-schema`"


@pytest.mark.slow
@pytest.mark.parametrize("provider", sorted(SCHEMA_FILES))
def test_extractor_reproduces_the_committed_schema_byte_for_byte(tmp_path, provider):
    cache = REPO / ".cache" / "tf-standin" / "wheels"
    out = tmp_path / "schema.json"
    result = subprocess.run([sys.executable, EXTRACTOR, "--provider", provider, "--cache", cache, "--out", out],
                            check=False, capture_output=True, text=True, timeout=600)
    if result.returncode != 0 and "pip download" in result.stderr:
        pytest.skip(f"the {provider} bindings could not be downloaded from PyPI: {result.stderr[-500:]}")
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == SCHEMA_FILES[provider].read_bytes(), "regenerate with `make standin-schema` and commit it"


@pytest.mark.terraform
@pytest.mark.parametrize("provider", sorted(SCHEMA_FILES))
def test_standin_serves_exactly_the_extracted_schema(standin_infra, terraform, schemas, provider):
    schema = schemas[provider]
    served = terraform.json(standin_infra, "providers", "schema", "-json")
    google = served["provider_schemas"][f"registry.terraform.io/hashicorp/{provider}"]

    def normal(block):  # the committed layout, from Terraform's rendering of what the provider served
        attrs = {n: {"type": a["type"], **{k: True for k in ("required", "optional", "computed") if a.get(k)}}
                 for n, a in block.get("attributes", {}).items()}
        nested = {}
        for n, b in block.get("block_types", {}).items():
            nested[n] = {"nesting_mode": b["nesting_mode"], "block": normal(b["block"]),
                         **{k: b[k] for k in ("min_items", "max_items") if b.get(k)}}
        return {"attributes": attrs, **({"block_types": nested} if nested else {})}

    for kind in ("resource_schemas", "data_source_schemas"):
        served_kind = google.get(kind, {})  # Terraform leaves out an empty section (google-beta has no data sources)
        assert set(served_kind) == set(schema[kind])
        for type_name, entry in schema[kind].items():
            assert normal(served_kind[type_name]["block"]) == entry["block"], type_name


@pytest.mark.terraform
def test_every_argument_infra_sets_is_in_the_schema_with_its_type(standin_plan_json, schemas):
    """Spot check that the stand-in refuses nothing real: walk what infra/ configures and what it plans."""
    problems = []

    def check(block, expressions, values, where):
        for name, expr in expressions.items():
            if name in block["attributes"]:
                attr = block["attributes"][name]
                if attr.get("computed") and not (attr.get("optional") or attr.get("required")):
                    problems.append(f"{where}.{name} is computed-only")
                value = values.get(name) if isinstance(values, dict) else None
                if value is not None and not matches(attr["type"], value):
                    problems.append(f"{where}.{name} = {value!r} is not {attr['type']}")
            elif name in block.get("block_types", {}):
                nested = block["block_types"][name]
                planned = values.get(name) if isinstance(values, dict) else None
                planned = [planned] if isinstance(planned, dict) else (planned or [])
                for i, sub in enumerate(expr if isinstance(expr, list) else [expr]):
                    check(nested["block"], sub, planned[i] if i < len(planned) else {}, f"{where}.{name}[{i}]")
            else:
                problems.append(f"{where}.{name} is not in the 8.7.0 schema of its provider")

    planned = {r["address"]: r["values"] for r in standin_plan_json["planned_values"]["root_module"]["resources"]}
    checked = 0
    for resource in standin_plan_json["configuration"]["root_module"]["resources"]:
        if not resource["type"].startswith("google_"):
            continue
        kind = "resource_schemas" if resource["mode"] == "managed" else "data_source_schemas"
        block = schemas[provider_of(resource)][kind][resource["type"]]["block"]
        values = planned.get(resource["address"]) or planned.get(resource["address"] + "[0]") or {}
        check(block, resource.get("expressions", {}), values, resource["address"])
        checked += 1
    assert checked >= 12 and not problems, "\n".join(problems)


@pytest.mark.terraform
def test_dynamic_blocks_and_planned_values_fit_the_schema(standin_plan_json, schemas):
    """Dynamic blocks (guest_accelerator, max_run_duration) are absent from the plan's configuration
    section; their names come from the HCL and their planned contents are type-checked here."""
    problems = []

    def walk(block, values, where):
        for name, value in values.items():
            if name in block["attributes"]:
                if value is not None and not matches(block["attributes"][name]["type"], value):
                    problems.append(f"{where}.{name} = {value!r}")
            elif name in block.get("block_types", {}):
                items = [value] if isinstance(value, dict) else (value or [])
                for i, item in enumerate(items):
                    walk(block["block_types"][name]["block"], item, f"{where}.{name}[{i}]")
            else:
                problems.append(f"{where}.{name} not in schema")

    resource_schemas = {**schemas["google"]["resource_schemas"], **schemas["google-beta"]["resource_schemas"]}
    resources = standin_plan_json["planned_values"]["root_module"]["resources"]
    for r in resources:
        if r["type"].startswith("google_"):
            walk(resource_schemas[r["type"]]["block"], r["values"], r["address"])
    gpu_node = next(r for r in resources if r["address"] == "google_compute_instance.node[0]")["values"]
    assert gpu_node["guest_accelerator"] == [{"type": "nvidia-tesla-t4", "count": 1}]

    def block_names(block):
        names = set(block.get("block_types", {}))
        for nested in block.get("block_types", {}).values():
            names |= block_names(nested["block"])
        return names

    for tf in (REPO / "infra").glob("*.tf"):
        for type_name, body in re.findall(r'^resource "(google_\w+)" "\w+" \{(.*?)^\}', tf.read_text(), re.MULTILINE | re.DOTALL):
            for dynamic in re.findall(r'dynamic "(\w+)"', body):
                if dynamic not in block_names(resource_schemas[type_name]["block"]):
                    problems.append(f"{tf.name}: dynamic {dynamic!r} is no block of {type_name}")
    assert not problems, "\n".join(problems)


def matches(ctype, value) -> bool:
    if isinstance(ctype, str):
        return ctype == "dynamic" or (isinstance(value, PY_TYPES[ctype]) and not (ctype == "number"
                                                                                 and isinstance(value, bool)))
    kind, inner = ctype
    if kind in ("list", "set"):
        return isinstance(value, list) and all(matches(inner, v) for v in value if v is not None)
    if kind == "map":
        return isinstance(value, dict) and all(matches(inner, v) for v in value.values() if v is not None)
    if kind == "object":
        return isinstance(value, dict)
    return True
