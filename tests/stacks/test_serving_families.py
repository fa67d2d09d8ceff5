"""Every serving family on both clouds through the offline preview and the policy pack: the test stacks
serving-gpu-families (EKS: g4dn, g6, g6e next to inf2 and g5) and serving-gcp-a100 (GKE: A100 next to L4)."""

from __future__ import annotations

import json

import pytest

from infra.tools.offline.engine import preview
from tests.helpers import ROOT, by_type, run_cli

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
TAG = "aws:autoscaling/tag:Tag"
GPU_TAINT = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
AUTOSCALER_GPU_LABEL = {"g5": "nvidia-a10g", "g4dn": "nvidia-tesla-t4", "g6": "nvidia-l4", "g6e": "nvidia-l40s"}


@pytest.fixture(scope="module")
def aws():
    return preview("serving-gpu-families")


@pytest.fixture(scope="module")
def gcp():
    return preview("serving-gcp-a100")


def groups(stack):
    return {g.parent.rsplit("::", 1)[1]: g.inputs for g in by_type(stack, NODE_GROUP)}


def test_every_eks_family_gets_its_groups_ami_taint_and_labels(aws):
    assert [d.message for d in aws.errors] == []
    found = groups(aws)
    assert {"pool-g4dn-xlarge", "pool-g4dn-2xlarge", "pool-g6-xlarge", "pool-g6-12xlarge"} <= set(found)
    assert {"pool-g6-xlarge-on-demand", "pool-g6e-xlarge", "pool-g6e-12xlarge"} <= set(found)
    for name, group in found.items():
        family = name.split("-")[1]
        if family == "system":
            continue
        if family == "inf2":
            assert group["amiType"] == "AL2023_x86_64_NEURON"
            continue
        assert group["amiType"] == "AL2023_x86_64_NVIDIA", name
        assert group["taints"] == GPU_TAINT, name
        assert group["labels"]["mlinfra.io/accelerator"] == family
        assert group["labels"]["nvidia.com/gpu.present"] == "true"
        assert group["labels"]["k8s.amazonaws.com/accelerator"] == AUTOSCALER_GPU_LABEL[family]


def test_scale_from_zero_tags_carry_each_types_gpu_count(aws):
    tags = {t.name: t.inputs["tag"] for t in by_type(aws, TAG)}
    gpus = {name: tag["value"] for name, tag in tags.items() if tag["key"].endswith("/resources/nvidia.com/gpu")}
    assert gpus["pool-g6-12xlarge-resources-nvidia-com-gpu"] == "4"
    assert gpus["pool-g4dn-xlarge-resources-nvidia-com-gpu"] == "1"
    assert gpus["pool-g6e-12xlarge-resources-nvidia-com-gpu"] == "4"


def test_each_model_lands_on_its_family(aws):
    deployments = {d.inputs["metadata"]["name"]: d.inputs for d in by_type(aws, "kubernetes:apps/v1:Deployment")}
    for name, family, gpus in (
        ("llama-3-2-3b-t4", "g4dn", "1"),
        ("llama-3-8b-l4", "g6", "1"),
        ("llama-3-70b-l40s", "g6e", "4"),
    ):
        pod = deployments[name]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"mlinfra.io/accelerator": family}
        (server,) = pod["containers"]
        assert server["resources"]["limits"]["nvidia.com/gpu"] == gpus
        assert "--tensor-parallel-size" in server["args"]


def test_the_gke_a100_pool_installs_its_driver_and_is_tainted(gcp):
    assert [d.message for d in gcp.errors] == []
    pools = {p.parent.rsplit("::", 1)[1]: p.inputs for p in by_type(gcp, "gcp:container/nodePool:NodePool")}
    a100 = pools["pool-a100"]["nodeConfig"]
    (accelerator,) = a100["guestAccelerators"]
    assert accelerator["type"] == "nvidia-a100-80gb" and accelerator["count"] == 1
    assert accelerator["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "LATEST"}
    assert a100["machineType"] == "a2-ultragpu-1g"
    assert a100["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert pools["pool-a100"]["nodeLocations"] == ["us-central1-a", "us-central1-c"]  # where A2 Ultra is offered
    assert pools["pool-a100"]["autoscaling"]["totalMinNodeCount"] == 0


@pytest.mark.parametrize("stack", ["serving-gpu-families", "serving-gcp-a100"])
def test_the_family_stacks_pass_the_policy_pack(stack):
    # The pack's program imports this tree's code (PYTHONPATH), as a clean clone's venv does.
    done = run_cli("policy", "--stack", stack, "--json", env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["summary"]["mandatory"] == 0
