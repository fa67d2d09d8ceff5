"""Render each pinned chart with a real Helm, from its source at the pinned tag, with the values mlinfra passes, and
keep the fields of the rendered objects that those values are meant to set, into
tests/contracts/data/rendered/<chart>-<version>-<case>.json (facts, not the chart). test_rendered_charts.py then
checks that the values of today are the ones rendered (their digest) and that the objects carry what we intend.

Run during development when a pin or a values function changes, in an environment with Helm's Go SDK (not a
project dependency; it needs Python 3.11+ and no helm binary):

    python -m venv /tmp/helm && /tmp/helm/bin/pip install helm-python-sdk pyyaml pydantic
    /tmp/helm/bin/python -m tests.contracts.render_chart --git-dir <clone>/.git --ref <tag> --path <chart folder> \
        --source https://github.com/<owner>/<repo> --case <name>
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import posixpath
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from infra.serving import charts, gateway_charts
from infra.serving.aws import front_door as aws_front_door
from infra.serving.aws.config import AwsModelSpec
from tests.contracts.facts_file import write_facts

PICKED = AwsModelSpec(name="mistral-7b", version="1.0", accelerator="g5", image="vllm/vllm-openai:v0.33.0")
# A model that scales to zero: its picker holds requests (flow control).
PICKED_AT_ZERO = AwsModelSpec.model_validate(
    {**PICKED.model_dump(by_alias=True, exclude_none=True), "minReplicas": 0, "scaleToZero": {}}
)
GKE_ACCOUNT = {"iam.gke.io/gcp-service-account": "secrets-mlinfra-demo@mlinfra-demo-project.iam.gserviceaccount.com"}
# The release name a case renders as, where it is not the chart's (resources are named after it).
RELEASE_NAMES = {
    "neuron-1.33": "neuron",
    "inferencepool": PICKED.name,
    "inferencepool-zero": PICKED_AT_ZERO.name,
    "envoy-gateway": gateway_charts.ENVOY_GATEWAY.release,
    "ai-gateway": gateway_charts.AI_GATEWAY.release,
    "aws-load-balancer-controller": aws_front_door.LOAD_BALANCER_CONTROLLER.release,
    "external-secrets": gateway_charts.EXTERNAL_SECRETS.release,
    "external-secrets-gke": gateway_charts.EXTERNAL_SECRETS.release,
}
# The values each case renders with, as the stacks pass them (representative inputs where they take any).
PRIORITIES = {10: [".*"], 20: ["^eks-pool-g5-xlarge-nodes-", "^eks-pool-g5-2xlarge-nodes-"]}
CASES: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    # case: (release namespace, values)
    "keda": ("keda", charts.keda_values),
    "cluster-autoscaler": (
        charts.AUTOSCALER_NAMESPACE,
        lambda: charts.cluster_autoscaler_values("mlinfra-demo", "us-east-1", PRIORITIES),
    ),
    "neuron-1.33": ("kube-system", lambda: charts.neuron_values("1.33")),
    "nvidia-device-plugin": (charts.NVIDIA_DEVICE_PLUGIN.namespace, charts.nvidia_values),
    "external-secrets": (
        gateway_charts.SECRETS_NAMESPACE,
        lambda: gateway_charts.external_secrets_values(charts.SYSTEM_NODES),
    ),
    "inferencepool": ("models", lambda: gateway_charts.inference_pool_values(PICKED)),
    "inferencepool-zero": ("models", lambda: gateway_charts.inference_pool_values(PICKED_AT_ZERO)),
    "envoy-gateway": (
        gateway_charts.GATEWAY_NAMESPACE,
        lambda: gateway_charts.envoy_gateway_values(charts.SYSTEM_NODES),
    ),
    "ai-gateway": (gateway_charts.AI_GATEWAY_NAMESPACE, lambda: gateway_charts.ai_gateway_values(charts.SYSTEM_NODES)),
    "aws-load-balancer-controller": (
        aws_front_door.LOAD_BALANCER_CONTROLLER.namespace,
        lambda: aws_front_door.load_balancer_controller_values(
            "mlinfra-demo", "us-east-1", "vpc-0abc", charts.SYSTEM_NODES
        ),
    ),
    "external-secrets-gke": (
        gateway_charts.SECRETS_NAMESPACE,
        lambda: gateway_charts.external_secrets_values(charts.SYSTEM_NODES, GKE_ACCOUNT),
    ),
}
KEPT_KINDS = (
    "Deployment",
    "DaemonSet",
    "PodDisruptionBudget",
    "ConfigMap",
    "Role",
    "ClusterRole",
    "ServiceAccount",
    "RoleBinding",
    "ClusterRoleBinding",
    "InferencePool",
)


def values_digest(values: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def checkout(git_dir: str, ref: str, path: str, into: Path) -> Path:
    """The chart folder's files at `ref` (git archive reads objects outside the path on some mirrors)."""
    for name in git(git_dir, "ls-tree", "-r", "--name-only", ref, path).splitlines():
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(subprocess.run(["git", "--git-dir", git_dir, "show", f"{ref}:{name}"], check=True,
                                          capture_output=True).stdout)  # fmt: skip
    return into / path


def local_dependencies(folder: Path, path: str) -> list[tuple[str, str]]:
    """(name, repository path) of the chart's dependencies in the same repository (`file://` ones, such as the
    Inference Extension's epplib library from v1.5.0), which its release packages under charts/ (`helm dependency
    update`); others are fetched from their own repositories and are not rendered here."""
    meta = yaml.safe_load((folder / "Chart.yaml").read_text(encoding="utf-8"))
    found = []
    for dependency in meta.get("dependencies") or []:
        repository = str(dependency.get("repository", ""))
        if repository.startswith("file://"):
            found.append((dependency["name"], posixpath.normpath(posixpath.join(path, repository[len("file://") :]))))
    return found


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    pod = doc.get("spec", {}).get("template", {}).get("spec", {})
    containers = pod.get("containers") or []
    kept = {
        "nodeSelector": pod.get("nodeSelector") or {},
        "tolerations": pod.get("tolerations") or [],
        "serviceAccountName": pod.get("serviceAccountName"),
        "labels": doc.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {},
        "schedulerName": pod.get("schedulerName"),
        "containers": {
            c["name"]: {
                "image": c.get("image"),
                "flags": sorted(a for a in (c.get("command") or []) + (c.get("args") or []) if str(a).startswith("--")),
                "args": [str(a) for a in c.get("args") or []],
                "resources": c.get("resources") or {},
                "ports": sorted(str(port.get("name")) for port in c.get("ports") or []),
            }
            for c in containers
        },
    }
    # Where a chart adds node affinity of its own (the NVIDIA plugin's NFD labels), the node selector alone is not
    # where the pod may run.
    if pod.get("affinity"):
        kept["affinity"] = pod["affinity"]
    return kept


def effects(rendered: dict[str, str]) -> Iterator[dict[str, Any]]:
    for name, text in sorted(rendered.items()):
        if not name.endswith((".yaml", ".yml")):
            continue  # NOTES.txt
        for doc in yaml.safe_load_all(text):
            if not isinstance(doc, dict) or doc.get("kind") not in KEPT_KINDS:
                continue
            kept: dict[str, Any] = {
                "kind": doc["kind"],
                "name": doc["metadata"]["name"],
                "namespace": doc["metadata"].get("namespace"),
            }
            if doc["kind"] in ("Deployment", "DaemonSet"):
                kept["replicas"] = doc["spec"].get("replicas")
                kept.update(_pod(doc))
            elif doc["kind"] == "PodDisruptionBudget":
                kept.update({k: doc["spec"].get(k) for k in ("minAvailable", "maxUnavailable")})
            elif doc["kind"] == "ConfigMap":
                kept["data"] = doc.get("data") or {}
            elif doc["kind"] == "InferencePool":
                kept["spec"] = doc.get("spec") or {}
            elif doc["kind"] == "ServiceAccount":
                kept["annotations"] = doc["metadata"].get("annotations") or {}
            elif doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
                kept["roleRef"] = {k: doc["roleRef"].get(k) for k in ("kind", "name")}
                kept["subjects"] = [
                    {k: s.get(k) for k in ("kind", "name", "namespace")} for s in doc.get("subjects") or []
                ]
            else:
                kept["rules"] = [
                    {k: r.get(k) for k in ("resources", "verbs", "resourceNames") if r.get(k)}
                    for r in doc.get("rules") or []
                ]
            yield kept


def _as_released(folder: Path, published: str | None, values_file: str, substitutions: dict[str, str]) -> None:
    """What a release does to a chart whose git copy says 0.0.0 (Envoy Gateway, AI Gateway, the Inference
    Extension): stamp its version, and render values.yaml from its template (`${Name}` placeholders)."""
    if published:
        meta = yaml.safe_load((folder / "Chart.yaml").read_text(encoding="utf-8"))
        meta["version"] = meta["appVersion"] = published
        (folder / "Chart.yaml").write_text(yaml.safe_dump(meta), encoding="utf-8")
    if values_file != "values.yaml":
        text = (folder / values_file).read_text(encoding="utf-8")
        for name, value in substitutions.items():
            text = text.replace("${" + name + "}", value)
        (folder / "values.yaml").write_text(text, encoding="utf-8")


def render(
    git_dir: str,
    ref: str,
    path: str,
    source: str,
    case: str,
    published: str | None = None,
    values_file: str = "values.yaml",
    substitutions: dict[str, str] | None = None,
) -> dict[str, Any]:
    import helm_python  # development only (module doc)

    namespace, values_of = CASES[case]
    values = values_of()
    with tempfile.TemporaryDirectory() as tmp:
        folder = checkout(git_dir, ref, path, Path(tmp))
        for name, dependency in local_dependencies(folder, path):
            shutil.copytree(checkout(git_dir, ref, dependency, Path(tmp)), folder / "charts" / name)
        _as_released(folder, published, values_file, substitutions or {})
        chart = helm_python.Chart.load(str(folder))
        meta = yaml.safe_load((folder / "Chart.yaml").read_text(encoding="utf-8"))
        rendered = chart.render(values, name=RELEASE_NAMES.get(case, meta["name"]),
                                namespace=namespace, is_install=True)  # fmt: skip
    return {
        "chart": meta["name"],
        "version": str(meta["version"]),
        "case": case,
        "source": {
            "repository": source,
            "ref": ref,
            "commit": git(git_dir, "rev-list", "-n", "1", ref).strip(),
            "path": path,
        },  # fmt: skip
        "renderedWith": f"Helm {helm_python.helm_sdk_version()} (helm-python-sdk)",
        "extracted": datetime.date.today().isoformat(),
        "valuesDigest": values_digest(values),
        "objects": list(effects(rendered)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--case", required=True, choices=sorted(CASES))
    parser.add_argument("--out", default=str(Path(__file__).parent / "data" / "rendered"))
    parser.add_argument("--published-version", help="the version the release stamps (Chart.yaml says 0.0.0)")
    parser.add_argument("--values-file", default="values.yaml", help="e.g. values.tmpl.yaml, rendered at release")
    parser.add_argument(
        "--substitute", action="append", default=[], metavar="NAME=VALUE", help="a ${NAME} of the values template"
    )
    args = parser.parse_args(argv)
    substitutions = dict(item.split("=", 1) for item in args.substitute)
    facts = render(
        args.git_dir,
        args.ref,
        args.path.rstrip("/"),
        args.source,
        args.case,
        args.published_version,
        args.values_file,
        substitutions,
    )
    write_facts(args.out, f"{facts['chart']}-{facts['version']}-{args.case}", facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
