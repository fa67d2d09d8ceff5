"""The serving-gcp-demo stack through the offline preview: private GKE, Workload Identity, shielded nodes,
a bounded and tainted L4 pool, and the same model server objects and KEDA scaler as on AWS."""

from __future__ import annotations

import pytest
import yaml

from infra.tools.offline.engine import preview
from tests.helpers import ROOT, by_type, one
from tests.k8s_schemas import manifest_of, validate

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
PREFIX = "models/llama-3-8b-l4/2025-06-01/cuda/"
ZONES = ["us-central1-a", "us-central1-b", "us-central1-c"]


@pytest.fixture(scope="module")
def demo():
    return preview("serving-gcp-demo")


def pools(demo):
    return {p.parent.rsplit("::", 1)[1]: p.inputs for p in by_type(demo, NODE_POOL)}


def test_previews_without_errors_or_unknown_properties(demo):
    assert [d.message for d in demo.errors] == []
    types = {s.type for s in demo.resources()}
    assert {
        "gcp:compute/network:Network",
        "gcp:compute/subnetwork:Subnetwork",
        "gcp:compute/router:Router",
        "gcp:compute/routerNat:RouterNat",
        CLUSTER,
        NODE_POOL,
        "gcp:serviceaccount/account:Account",
        "gcp:serviceaccount/iAMMember:IAMMember",
        "kubernetes:keda.sh/v1alpha1:ScaledObject",
        "kubernetes:apps/v1:Deployment",
    } <= types
    assert not any(t.startswith("aws:") for t in types)


def test_vpc_native_subnet_and_nat_egress(demo):
    subnet = one(demo, "gcp:compute/subnetwork:Subnetwork").inputs
    assert subnet["privateIpGoogleAccess"] is True and subnet["region"] == "us-central1"
    assert [r["rangeName"] for r in subnet["secondaryIpRanges"]] == ["pods", "services"]
    nat = one(demo, "gcp:compute/routerNat:RouterNat").inputs
    assert nat["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS"


def test_private_cluster_with_workload_identity_shielded_nodes_and_a_release_channel(demo):
    cluster = one(demo, CLUSTER).inputs
    assert cluster["privateClusterConfig"]["enablePrivateNodes"] is True
    assert cluster["privateClusterConfig"]["enablePrivateEndpoint"] is False  # access: restricted
    assert [b["cidrBlock"] for b in cluster["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == [
        "10.90.0.0/20",
        "203.0.113.0/24",
    ]
    assert cluster["workloadIdentityConfig"] == {"workloadPool": "mlinfra-demo-project.svc.id.goog"}
    assert cluster["enableShieldedNodes"] is True and cluster["releaseChannel"] == {"channel": "REGULAR"}
    assert cluster["removeDefaultNodePool"] is True
    assert cluster["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods",
        "servicesSecondaryRangeName": "services",
    }


def test_authorized_networks_per_endpoint_access():
    from components.serving.gcp.cluster import authorized_networks
    from infra.serving.gcp.config import GkeClusterSpec
    from infra.serving.spec import EndpointSpec

    private = authorized_networks(GkeClusterSpec(endpoint=EndpointSpec(access="private")))
    assert [b.cidr_block for b in private.cidr_blocks] == ["10.90.0.0/20"]  # the VPC only
    admins = EndpointSpec(access="restricted", public_access_cidrs=["203.0.113.0/24"])
    restricted = authorized_networks(GkeClusterSpec(endpoint=admins))
    assert [b.cidr_block for b in restricted.cidr_blocks] == ["10.90.0.0/20", "203.0.113.0/24"]


def test_l4_pool_is_bounded_tainted_with_gke_installed_drivers(demo):
    l4 = pools(demo)["pool-l4"]
    spec = yaml.safe_load((ROOT / "stacks" / "Pulumi.serving-gcp-demo.yaml").read_text(encoding="utf-8"))["config"][
        "mlinfra:serving"
    ]
    bounds = spec["nodePools"]["l4"]
    # Total bounds over the zones: per-zone ones (minNodeCount) would keep one L4 node in every zone.
    assert l4["autoscaling"] == {
        "totalMinNodeCount": bounds["minNodes"],
        "totalMaxNodeCount": bounds["maxNodes"],
        "locationPolicy": "ANY",
    }
    # Created empty: one per zone would be three L4 nodes for minNodes 1; the pending replicas bring the autoscaler.
    assert l4["nodeLocations"] == ZONES and l4["initialNodeCount"] == 0
    assert pools(demo)["pool-system"]["initialNodeCount"] == 1  # 1 per zone reaches the system pool's 2
    config = l4["nodeConfig"]
    assert config["machineType"] == "g2-standard-8"
    assert config["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert config["guestAccelerators"] == [
        {"type": "nvidia-l4", "count": 1, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}
    ]
    assert config["labels"]["mlinfra.io/accelerator"] == "l4"


def test_every_pool_private_shielded_on_the_gke_metadata_server(demo):
    found = pools(demo)
    assert set(found) == {"pool-system", "pool-l4"}
    for pool in found.values():
        assert pool["networkConfig"] == {"enablePrivateNodes": True}
        assert pool["nodeConfig"]["shieldedInstanceConfig"] == {
            "enableSecureBoot": True,
            "enableIntegrityMonitoring": True,
        }
        assert pool["nodeConfig"]["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert pool["nodeConfig"]["serviceAccount"].startswith("gke-nodes-mlinfra-serving-gcp")
    assert "taints" not in found["pool-system"]["nodeConfig"]


def test_model_server_reads_the_bridge_bucket_read_only_through_workload_identity(demo):
    # The demo's bucket is the registry's mirror, whose stack owns the read grants (one owner per binding).
    assert by_type(demo, "gcp:storage/bucketIAMMember:BucketIAMMember") == []
    granted = preview("serving-gcp-demo", [("mlinfra:serving.modelStore.grantRead", "true")])
    account = one(granted, "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert account.inputs["bucket"] == "mlinfra-models-bridge-demo"
    assert account.inputs["role"] == "roles/storage.objectViewer"
    email = "model-llama-3-8b-l4@mlinfra-demo-project.iam.gserviceaccount.com"
    assert account.inputs["member"] == f"serviceAccount:{email}"
    binding = one(demo, "gcp:serviceaccount/iAMMember:IAMMember").inputs
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == "serviceAccount:mlinfra-demo-project.svc.id.goog[models/llama-3-8b-l4]"
    sa = one(demo, "kubernetes:core/v1:ServiceAccount").inputs
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": email}
    template = one(demo, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_the_server_reads_its_artefact_through_cloud_storage_fuse(demo):
    """vLLM 0.9.1's streamer reads only s3:// (is_s3): a gs:// --model went to the Hugging Face download path.
    The artefact prefix is mounted read-only with GKE's Cloud Storage FUSE CSI driver instead."""
    cluster = one(demo, "gcp:container/cluster:Cluster").inputs
    assert cluster["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}
    template = one(demo, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]
    assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    container = template["spec"]["containers"][0]
    assert container["args"][:2] == ["--model", "/models"] and "runai_streamer" not in container["args"]
    assert {"name": "model", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    volume = next(v for v in template["spec"]["volumes"] if v["name"] == "model")
    assert volume["csi"] == {
        "driver": "gcsfuse.csi.storage.gke.io",
        "readOnly": True,
        "volumeAttributes": {
            "bucketName": "mlinfra-models-bridge-demo",
            "mountOptions": f"implicit-dirs,only-dir={PREFIX.rstrip('/')}",
        },
    }
    # GKE servers refuse a failed or unfinished version as the AWS ones do, before the server starts.
    [check] = template["spec"]["initContainers"]
    assert check["name"] == "check-model" and check["image"] == container["image"]
    assert "_FAILED" in check["command"][-1] and "manifest.json" in check["command"][-1]


def test_scales_on_queue_depth_and_every_kubernetes_object_validates(demo):
    scaler = one(demo, "kubernetes:keda.sh/v1alpha1:ScaledObject").inputs
    assert [t["name"] for t in scaler["spec"]["triggers"]] == ["queue-depth", "kv-cache"]
    assert (scaler["spec"]["minReplicaCount"], scaler["spec"]["maxReplicaCount"]) == (1, 3)
    objects = [
        s
        for s in demo.resources()
        if s.custom and s.type.startswith("kubernetes:") and s.type != "kubernetes:helm.sh/v3:Release"
    ]
    assert len(objects) == 1 + 5  # the namespace, five objects per server
    for step in objects:
        validate(manifest_of(step))


def test_kubernetes_provider_targets_the_cluster_with_the_gke_auth_plugin(demo):
    provider = one(demo, "pulumi:providers:kubernetes").inputs
    assert "gke-gcloud-auth-plugin" in provider["kubeconfig"] and "https://192.0.2.10" in provider["kubeconfig"]


def test_docker_hub_images_come_through_the_projects_artifact_registry(demo):
    """The vLLM image (Docker Hub) is pulled through a remote repository in the stack's region, not anonymously
    through Cloud NAT; the nodes read it with the project-wide artifactregistry.reader role they already have."""
    repository = one(demo, "gcp:artifactregistry/repository:Repository").inputs
    assert (repository["repositoryId"], repository["location"], repository["format"], repository["mode"]) == (
        "docker-hub",
        "us-central1",
        "DOCKER",
        "REMOTE_REPOSITORY",
    )
    assert repository["remoteRepositoryConfig"]["dockerRepository"] == {"publicRepository": "DOCKER_HUB"}
    [cleanup] = repository["cleanupPolicies"]
    assert cleanup["action"] == "DELETE" and cleanup["condition"] == {"olderThan": "2592000s"}
    container = one(demo, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]["spec"]["containers"][0]
    project = yaml.safe_load((ROOT / "stacks" / "Pulumi.serving-gcp-demo.yaml").read_text(encoding="utf-8"))["config"][
        "gcp:project"
    ]
    assert container["image"] == f"us-central1-docker.pkg.dev/{project}/docker-hub/vllm/vllm-openai:v0.33.0"
    from infra.serving.gcp.gke import NODE_ROLES

    assert "roles/artifactregistry.reader" in NODE_ROLES
    # Off: the entry's reference as it is, and no repository.
    plain = preview("serving-gcp-demo", [("mlinfra:serving.imageMirror.enabled", "false")])
    assert not by_type(plain, "gcp:artifactregistry/repository:Repository")
    image = one(plain, "kubernetes:apps/v1:Deployment").inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "vllm/vllm-openai:v0.33.0"
