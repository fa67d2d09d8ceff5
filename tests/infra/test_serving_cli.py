"""The serving stack through the CLI: the --json digest, and bad inputs exiting 2 with field-naming lines."""

from __future__ import annotations

import json

from tests.helpers import run_cli


def test_preview_json_contains_the_fleet():
    done = run_cli("preview", "--stack", "serving-demo", "--json")
    assert done.returncode == 0, done.stderr
    digest = json.loads(done.stdout)
    types = [s["newState"]["type"] for s in digest["steps"]]
    assert types.count("aws:eks/cluster:Cluster") == 1
    # one per instance type, g5's on-demand base, and an on-demand fallback behind each g5 Spot type
    assert types.count("aws:eks/nodeGroup:NodeGroup") == 8  # inf2 2, g5 2 Spot + 2 fallback, system 2
    # one per model server, and the front door's rate-limit Redis
    assert types.count("kubernetes:apps/v1:Deployment") == 3
    assert types.count("kubernetes:keda.sh/v1alpha1:ScaledObject") == 2
    assert types.count("kubernetes:gateway.networking.k8s.io/v1:Gateway") == 1
    assert not [d for d in digest["diagnostics"] if d["severity"] == "error"]


def test_shape_errors_exit_2_naming_the_field():
    done = run_cli(
        "preview",
        "--stack",
        "serving-demo",
        "-c",
        "mlinfra:serving.models[0].maxReplicas=0",
        "-c",
        "mlinfra:serving.cluster.endpoint.publicAccessCidrs[0]=0.0.0.0/0",
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: mlinfra:serving.cluster.endpoint.publicAccessCidrs: 0.0.0.0/0 admit 3,702,258,432 public IPv4 "
        "addresses (100.0% of them), the internet at large: the Kubernetes API is never open to the whole "
        "internet (mandatory policy eks-api-endpoint-restricted); use access: restricted and list the networks "
        "that administer the cluster in publicAccessCidrs",
        "error: mlinfra:serving.models[0].maxReplicas: must be at least 1 (got 0)",
    ]


def test_meaning_errors_exit_2_naming_the_field():
    done = run_cli(
        "preview",
        "--stack",
        "serving-demo",
        "-c",
        "mlinfra:serving.models[0].variant=cuda",
        "-c",
        "mlinfra:serving.models[1].maxReplicas=1",
        "-c",
        "mlinfra:serving.nodePools.g5.instanceTypes[0]=p4d.24xlarge",
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[0].startswith(
        "error: mlinfra:serving.nodePools.g5.instanceTypes[0]: p4d.24xlarge is a training type; serving takes one of: "
    )
    assert lines[1:] == [
        "error: mlinfra:serving.models[0].variant: cuda artefacts cannot be served on inf2: "
        "inf2 runs Neuron-compiled artefacts only; use neuron, neuron-int8",
        "error: mlinfra:serving.models[1].maxReplicas: 1 is below the schedule's largest minimum (2); use at least 2",
    ]
