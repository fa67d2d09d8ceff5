"""Schema validation of Kubernetes objects: built-in kinds with `kubernetes-validate` (the Kubernetes
OpenAPI schemas, strict: unknown fields fail), custom resources with their CRDs' openAPIV3Schema
(tests/data/crds, see its README)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.33.0"  # the serving cluster's default minor version
CRD_DIR = Path(__file__).parent / "data" / "crds"
CRD_FILES = {
    ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobjects.yaml",
    ("gateway.networking.k8s.io/v1", "GatewayClass"): "gatewayclasses.gateway.networking.k8s.io.yaml",
    ("gateway.networking.k8s.io/v1", "Gateway"): "gateways.gateway.networking.k8s.io.yaml",
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyProxy"): "envoyproxies.gateway.envoyproxy.io.yaml",
    ("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy"): "securitypolicies.gateway.envoyproxy.io.yaml",
    ("gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy"): "backendtrafficpolicies.gateway.envoyproxy.io.yaml",
    ("gateway.envoyproxy.io/v1alpha1", "ClientTrafficPolicy"): "clienttrafficpolicies.gateway.envoyproxy.io.yaml",
    ("aigateway.envoyproxy.io/v1beta1", "AIGatewayRoute"): "aigatewayroutes.aigateway.envoyproxy.io.yaml",
    ("external-secrets.io/v1", "SecretStore"): "secretstores.external-secrets.io.yaml",
    ("external-secrets.io/v1", "ExternalSecret"): "externalsecrets.external-secrets.io.yaml",
}


def _closed(schema: Any) -> Any:
    """Reject unknown fields where the CRD lists properties (the API server would prune them)."""
    if isinstance(schema, dict):
        schema = {k: _closed(v) for k, v in schema.items()}
        if schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_closed(v) for v in schema]
    return schema


@functools.cache
def crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRD_DIR / CRD_FILES[(api_version, kind)]).read_text(encoding="utf-8"))
    group, version = api_version.split("/")
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = _closed(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    # metadata is the ObjectMeta of every object; the CRD leaves it open.
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def is_custom(manifest: dict[str, Any]) -> bool:
    return (manifest["apiVersion"], manifest["kind"]) in CRD_FILES


def validate(manifest: dict[str, Any]) -> None:
    """Raise if `manifest` does not validate against its kind's schema."""
    if is_custom(manifest):
        jsonschema.validate(
            manifest, crd_schema(manifest["apiVersion"], manifest["kind"]), cls=jsonschema.Draft7Validator
        )
    else:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)


def manifest_of(step) -> dict[str, Any]:
    """The object a recorded Kubernetes registration declares (inputs carry apiVersion and kind)."""
    return {k: v for k, v in step.inputs.items() if not k.startswith("__")}
