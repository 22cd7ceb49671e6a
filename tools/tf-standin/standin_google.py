"""A stand-in for hashicorp/google and hashicorp/google-beta 8.7.0 that the real `terraform` binary runs offline.

Serves the schema that scripts/extract_google_schema.py wrote (google_schema_8.7.0.json) over
tfplugin6, using the PyPI `tf` framework for the go-plugin handshake and its generated protobuf
for everything else (the framework's own resource model has no list-nested blocks). Terraform
itself then checks every argument, type, block depth and reference against the real schema.
The provider plans computed values as unknown, answers data sources with fake values (image
families from a table of live and retired ones, fake_values.IMAGE_FAMILIES) and, on
apply, stores deterministic fake computed values in state. It never talks to Google.

Not run by hand: mirror.py installs it as `terraform-provider-google_v8.7.0` (serving
google_schema_8.7.0.json) and `terraform-provider-google-beta_v8.7.0` (serving
google_beta_schema_8.7.0.json: only what infra/ needs from google-beta, the TPU VM) into a
filesystem mirror named by a test-only TF_CLI_CONFIG_FILE.
"""

import copy
import json
import sys
from pathlib import Path

import fake_values
import tf.provider
from tf.gen import tfplugin_pb2 as pb
from tf.iface import Provider
from tf.runner import run_provider
from tf.types import Unknown
from tf.utils import Diagnostics, read_dynamic_value, to_dynamic_value

HERE = Path(__file__).resolve().parent
# Which provider this process serves: main() sets it from the name mirror.py installed it under.
PROVIDER_NAME = "google"


def schema_file(provider_name: str) -> Path:
    return HERE / f"{provider_name.replace('-', '_')}_schema_8.7.0.json"


SCHEMA_FILE = schema_file(PROVIDER_NAME)
NESTING = {"single": pb.Schema.NestedBlock.SINGLE, "list": pb.Schema.NestedBlock.LIST,
           "set": pb.Schema.NestedBlock.SET}
# Arguments whose change forces a new resource. The jsii bindings do not carry ForceNew, so this is
# the provider's documented behaviour for the types infra/ uses; anything else plans an in-place update.
FORCE_NEW_EVERYWHERE = {"name", "project", "zone", "region", "location"}
FORCE_NEW = {
    "google_artifact_registry_repository": {"repository_id", "format", "mode"},
    "google_artifact_registry_repository_iam_member": {"repository", "role", "member"},
    "google_compute_address": {"address", "address_type", "subnetwork", "purpose"},
    "google_compute_disk": {"type", "image", "snapshot"},
    "google_compute_firewall": {"network", "direction"},
    "google_compute_instance": {"boot_disk", "resource_policies"},  # "Modifying this list will cause the instance to recreate"
    "google_compute_instance_template": None,  # templates are immutable: every change replaces
    "google_compute_network": {"auto_create_subnetworks"},
    "google_compute_resource_policy": None,  # resource policies cannot be edited: every change replaces
    "google_compute_router": {"network"},
    "google_compute_router_nat": {"router"},
    "google_compute_subnetwork": {"network"},
    "google_project_iam_custom_role": {"role_id"},
    "google_project_iam_member": {"role", "member"},
    "google_project_service": {"service"},
    "google_service_account": {"account_id"},
    "google_storage_bucket": set(),
    "google_storage_bucket_iam_member": {"bucket", "role", "member"},
    # google-beta. The TPU API patches only description, tags, labels, metadata, shielded instance
    # config and network config in place; a new type, runtime, account or scheduling recreates the VM.
    "google_tpu_v2_vm": {"accelerator_type", "accelerator_config", "runtime_version", "service_account",
                         "scheduling_config", "cidr_block", "data_disks"},
}


def cty(ctype) -> bytes:
    return json.dumps(ctype, separators=(",", ":")).encode()


def block_to_pb(block: dict) -> pb.Schema.Block:
    attributes = [
        pb.Schema.Attribute(name=name, type=cty(a["type"]), required=a.get("required", False),
                            optional=a.get("optional", False), computed=a.get("computed", False))
        for name, a in sorted(block["attributes"].items())
    ]
    nested = [
        pb.Schema.NestedBlock(type_name=name, nesting=NESTING[b["nesting_mode"]], block=block_to_pb(b["block"]),
                              min_items=b.get("min_items", 0), max_items=b.get("max_items", 0))
        for name, b in sorted(block.get("block_types", {}).items())
    ]
    return pb.Schema.Block(attributes=attributes, block_types=nested)


def items(value, mode: str) -> list:
    if value is None or value is Unknown:
        return []
    return [value] if mode == "single" else list(value)


def mark_unknown(block: dict, value: dict) -> None:
    """Computed attributes the configuration left null become "(known after apply)"."""
    for name, a in block["attributes"].items():
        if a.get("computed") and value.get(name) is None:
            value[name] = Unknown
    for name, b in block.get("block_types", {}).items():
        for element in items(value.get(name), b["nesting_mode"]):
            if isinstance(element, dict):
                mark_unknown(b["block"], element)


def fill_unknown(block: dict, value: dict, inventor, state: dict, path=(), index: int = 0) -> None:
    for name, a in block["attributes"].items():
        if value.get(name) is Unknown:
            value[name] = inventor.value(path + (name,), a, state, index)
    for name, b in block.get("block_types", {}).items():
        for i, element in enumerate(items(value.get(name), b["nesting_mode"])):
            if isinstance(element, dict):
                fill_unknown(b["block"], element, inventor, state, path + (name,), i if not path else index)


class StandinServicer(tf.provider.ProviderServicer):
    """tfplugin6 answered straight from the extracted schema; every RPC Terraform 1.11 uses."""

    def __init__(self, app):
        super().__init__(app)
        doc = json.loads(SCHEMA_FILE.read_text())
        self.version = doc["provider_version"]
        self.provider_block = doc["provider"]["block"]
        self.resources = {k: v["block"] for k, v in doc["resource_schemas"].items()}
        self.data_sources = {k: v["block"] for k, v in doc["data_source_schemas"].items()}
        self.config: dict = {}

    # ---- schema ----
    def GetMetadata(self, request, context):
        return pb.GetMetadata.Response(
            server_capabilities=pb.ServerCapabilities(plan_destroy=True),
            resources=[pb.GetMetadata.ResourceMetadata(type_name=t) for t in sorted(self.resources)],
            data_sources=[pb.GetMetadata.DataSourceMetadata(type_name=t) for t in sorted(self.data_sources)],
        )

    def GetProviderSchema(self, request, context):
        return pb.GetProviderSchema.Response(
            provider=pb.Schema(block=block_to_pb(self.provider_block)),
            provider_meta=pb.Schema(block=pb.Schema.Block()),
            resource_schemas={t: pb.Schema(block=block_to_pb(b)) for t, b in self.resources.items()},
            data_source_schemas={t: pb.Schema(block=block_to_pb(b)) for t, b in self.data_sources.items()},
            server_capabilities=pb.ServerCapabilities(plan_destroy=True),
        )

    # ---- validation: Terraform checks names, types, nesting and required arguments from the schema ----
    def ValidateProviderConfig(self, request, context):
        return pb.ValidateProviderConfig.Response()

    def ValidateResourceConfig(self, request, context):
        return pb.ValidateResourceConfig.Response()

    def ValidateDataResourceConfig(self, request, context):
        return pb.ValidateDataResourceConfig.Response()

    def ConfigureProvider(self, request, context):
        self.config = read_dynamic_value(request.config) or {}
        return pb.ConfigureProvider.Response()

    # ---- resources ----
    def UpgradeResourceState(self, request, context):
        state = json.loads(request.raw_state.json) if request.raw_state.json else None
        return pb.UpgradeResourceState.Response(upgraded_state=to_dynamic_value(state))

    def ReadResource(self, request, context):
        state = read_dynamic_value(request.current_state)
        if request.type_name == "google_compute_subnetwork" and state:
            fake_values.remember_subnet(state)
        return pb.ReadResource.Response(new_state=request.current_state, private=request.private)

    def PlanResourceChange(self, request, context):
        block = self.resources[request.type_name]
        prior = read_dynamic_value(request.prior_state)
        proposed = read_dynamic_value(request.proposed_new_state)
        if proposed is None:  # destroy
            return pb.PlanResourceChange.Response(planned_state=request.proposed_new_state)
        if request.type_name == "google_compute_subnetwork":
            fake_values.remember_subnet(proposed)
        if prior is not None and proposed == prior:
            return pb.PlanResourceChange.Response(planned_state=request.prior_state)
        planned = copy.deepcopy(proposed)
        mark_unknown(block, planned)
        if "effective_labels" in block["attributes"]:
            planned["terraform_labels"], planned["effective_labels"] = fake_values.planned_labels(planned, self.config)
        replace = self.replace_paths(request.type_name, prior, proposed) if prior is not None else []
        return pb.PlanResourceChange.Response(
            planned_state=to_dynamic_value(planned),
            requires_replace=[pb.AttributePath(steps=[pb.AttributePath.Step(attribute_name=n)]) for n in replace],
        )

    @staticmethod
    def replace_paths(type_name: str, prior: dict, proposed: dict) -> list[str]:
        # A value unknown until apply may differ, so it counts as a change (as in the real SDK's RequiresNew).
        changed = sorted(k for k in proposed if proposed[k] is Unknown or proposed[k] != prior.get(k))
        forced = FORCE_NEW.get(type_name, set())
        if forced is None:
            return changed
        return [k for k in changed if k in forced or k in FORCE_NEW_EVERYWHERE]

    def ApplyResourceChange(self, request, context):
        planned = read_dynamic_value(request.planned_state)
        if planned is None:  # destroy: nothing to tear down but state
            return pb.ApplyResourceChange.Response(new_state=request.planned_state)
        block = self.resources[request.type_name]
        inventor = fake_values.Inventor(request.type_name, self.config)
        state = copy.deepcopy(planned)
        inventor.top(state)
        fill_unknown(block, state, inventor, state)
        if request.type_name == "google_compute_subnetwork":
            fake_values.remember_subnet(state)
        return pb.ApplyResourceChange.Response(new_state=to_dynamic_value(state), private=request.planned_private)

    def ImportResourceState(self, request, context):
        diags = Diagnostics().add_error(
            "The stand-in google provider cannot import",
            f"{request.type_name} {request.id!r}: import reads the real API; run it against GCP with the real provider.")
        return pb.ImportResourceState.Response(diagnostics=diags.to_pb())

    # ---- data sources ----
    def ReadDataSource(self, request, context):
        config = read_dynamic_value(request.config) or {}
        attrs = self.data_sources[request.type_name]["attributes"]
        try:
            state = fake_values.read_data_source(request.type_name, config, attrs, self.config)
        except fake_values.NotFound as error:  # the real provider's error for an API 404, as Terraform prints it
            return pb.ReadDataSource.Response(diagnostics=Diagnostics().add_error(str(error), "").to_pb())
        return pb.ReadDataSource.Response(state=to_dynamic_value(state))


class StandinProvider(Provider):
    """What tf.runner needs from a Provider; the servicer above answers every RPC itself."""

    def get_model_prefix(self) -> str:
        return "google_"

    def full_name(self) -> str:
        return f"registry.terraform.io/hashicorp/{PROVIDER_NAME}"

    def get_provider_schema(self, diags):
        raise NotImplementedError

    def validate_config(self, diags, config):
        pass

    def configure_provider(self, diags, config):
        pass

    def get_data_sources(self):
        return []

    def get_resources(self):
        return []


def main(provider_name: str = "google") -> None:
    global PROVIDER_NAME, SCHEMA_FILE
    PROVIDER_NAME, SCHEMA_FILE = provider_name, schema_file(provider_name)
    if "--version" in sys.argv:
        print(json.loads(SCHEMA_FILE.read_text())["provider_version"])
        return
    # tf.runner builds tf.provider.ProviderServicer by name; point that name at ours.
    tf.provider.ProviderServicer = StandinServicer
    run_provider(StandinProvider(), sys.argv)


if __name__ == "__main__":
    main()
