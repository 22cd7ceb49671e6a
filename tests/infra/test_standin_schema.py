"""The extracted hashicorp/google 8.7.0 schema: where it comes from, that it is reproducible,
that the stand-in serves exactly it, and that every argument infra/ sets exists in it with the
type infra/ gives it."""

import json
import re
import subprocess
import sys

import pytest
from standin_tools import REPO

SCHEMA_FILE = REPO / "tools" / "tf-standin" / "google_schema_8.7.0.json"
EXTRACTOR = REPO / "scripts" / "extract_google_schema.py"
PY_TYPES = {"string": str, "number": (int, float), "bool": bool}


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA_FILE.read_text())


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


def test_schema_covers_every_google_type_infra_uses(schema):
    text = "\n".join(p.read_text() for p in (REPO / "infra").rglob("*.tf") if ".terraform" not in p.parts)
    resources = set(re.findall(r'^\s*resource\s+"(google_\w+)"', text, re.MULTILINE))
    data_sources = set(re.findall(r'^\s*data\s+"(google_\w+)"', text, re.MULTILINE))
    assert resources <= set(schema["resource_schemas"]), "run `make standin-schema`"
    assert data_sources <= set(schema["data_source_schemas"]), "run `make standin-schema`"


@pytest.mark.slow
def test_extractor_reproduces_the_committed_schema_byte_for_byte(tmp_path):
    cache = REPO / ".cache" / "tf-standin" / "wheels"
    out = tmp_path / "schema.json"
    result = subprocess.run([sys.executable, EXTRACTOR, "--cache", cache, "--out", out], check=False, capture_output=True,
                            text=True, timeout=600)
    if result.returncode != 0 and "pip download" in result.stderr and not list(cache.glob("*.whl")):
        pytest.skip(f"cdktn-provider-google 21.1.0 could not be downloaded from PyPI: {result.stderr[-500:]}")
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == SCHEMA_FILE.read_bytes(), "regenerate with `make standin-schema` and commit it"


@pytest.mark.terraform
def test_standin_serves_exactly_the_extracted_schema(standin_infra, terraform, schema):
    served = terraform.json(standin_infra, "providers", "schema", "-json")
    google = served["provider_schemas"]["registry.terraform.io/hashicorp/google"]

    def normal(block):  # the committed layout, from Terraform's rendering of what the provider served
        attrs = {n: {"type": a["type"], **{k: True for k in ("required", "optional", "computed") if a.get(k)}}
                 for n, a in block.get("attributes", {}).items()}
        nested = {}
        for n, b in block.get("block_types", {}).items():
            nested[n] = {"nesting_mode": b["nesting_mode"], "block": normal(b["block"]),
                         **{k: b[k] for k in ("min_items", "max_items") if b.get(k)}}
        return {"attributes": attrs, **({"block_types": nested} if nested else {})}

    for kind in ("resource_schemas", "data_source_schemas"):
        assert set(google[kind]) == set(schema[kind])
        for type_name, entry in schema[kind].items():
            assert normal(google[kind][type_name]["block"]) == entry["block"], type_name


@pytest.mark.terraform
def test_every_argument_infra_sets_is_in_the_schema_with_its_type(standin_plan_json, schema):
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
                problems.append(f"{where}.{name} is not in the 8.7.0 schema")

    planned = {r["address"]: r["values"] for r in standin_plan_json["planned_values"]["root_module"]["resources"]}
    checked = 0
    for resource in standin_plan_json["configuration"]["root_module"]["resources"]:
        if not resource["type"].startswith("google_"):
            continue
        kind = "resource_schemas" if resource["mode"] == "managed" else "data_source_schemas"
        block = schema[kind][resource["type"]]["block"]
        values = planned.get(resource["address"]) or planned.get(resource["address"] + "[0]") or {}
        check(block, resource.get("expressions", {}), values, resource["address"])
        checked += 1
    assert checked >= 12 and not problems, "\n".join(problems)


@pytest.mark.terraform
def test_dynamic_blocks_and_planned_values_fit_the_schema(standin_plan_json, schema):
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

    resources = standin_plan_json["planned_values"]["root_module"]["resources"]
    for r in resources:
        if r["type"].startswith("google_"):
            walk(schema["resource_schemas"][r["type"]]["block"], r["values"], r["address"])
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
                if dynamic not in block_names(schema["resource_schemas"][type_name]["block"]):
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
