"""The serving-gcp-demo stack through the offline preview: private GKE, Workload Identity, shielded nodes,
a bounded and tainted L4 pool, and the same model server objects and KEDA scaler as on AWS."""

from __future__ import annotations

import pytest
import yaml

from infra.core.project import load_project
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


def _server(result):
    """The model server's Deployment (the front door runs its rate limiter's Redis beside it)."""
    (found,) = [r for r in by_type(result, "kubernetes:apps/v1:Deployment") if r.name.startswith("model-")]
    return found


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
    (binding,) = [
        r.inputs for r in by_type(demo, "gcp:serviceaccount/iAMMember:IAMMember") if r.name.startswith("model-")
    ]
    assert binding["role"] == "roles/iam.workloadIdentityUser"
    assert binding["member"] == "serviceAccount:mlinfra-demo-project.svc.id.goog[models/llama-3-8b-l4]"
    (sa,) = [r.inputs for r in by_type(demo, "kubernetes:core/v1:ServiceAccount") if r.name.startswith("model-")]
    assert sa["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": email}
    template = _server(demo).inputs["spec"]["template"]
    container = template["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_the_server_reads_its_artefact_through_cloud_storage_fuse(demo):
    """vLLM 0.9.1's streamer reads only s3:// (is_s3): a gs:// --model went to the Hugging Face download path.
    The artefact prefix is mounted read-only with GKE's Cloud Storage FUSE CSI driver instead."""
    cluster = one(demo, "gcp:container/cluster:Cluster").inputs
    assert cluster["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"  # Dataplane V2 enforces the NetworkPolicies
    template = _server(demo).inputs["spec"]["template"]
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
    servers = [s for s in objects if s.name.startswith("model-")]
    assert len(servers) == 5  # five objects per server
    for step in objects:  # the server's, the namespace and the front door's
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
    container = _server(demo).inputs["spec"]["template"]["spec"]["containers"][0]
    project = yaml.safe_load((ROOT / "stacks" / "Pulumi.serving-gcp-demo.yaml").read_text(encoding="utf-8"))["config"][
        "gcp:project"
    ]
    assert container["image"] == f"us-central1-docker.pkg.dev/{project}/docker-hub/vllm/vllm-openai:v0.33.0"
    from infra.serving.gcp.gke import NODE_ROLES

    assert "roles/artifactregistry.reader" in NODE_ROLES
    # Off: the entry's reference as it is, and no repository.
    plain = preview("serving-gcp-demo", [("mlinfra:serving.imageMirror.enabled", "false")])
    assert not by_type(plain, "gcp:artifactregistry/repository:Repository")
    image = _server(plain).inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "vllm/vllm-openai:v0.33.0"


def _object(result, kind: str):
    (found,) = [
        r.inputs for r in result.resources() if r.type.endswith(f":{kind}") and r.type.startswith("kubernetes:")
    ]
    return found


def test_the_front_door_ends_tls_at_the_proxies_behind_a_passthrough_load_balancer(demo):
    """GKE's external passthrough NLB forwards TCP to the nodes running a proxy (the callers' addresses kept);
    the HTTPS listener ends TLS with the certificate External Secrets keeps from Secret Manager."""
    service = _object(demo, "EnvoyProxy")["spec"]["provider"]["kubernetes"]["envoyService"]
    assert service == {
        "type": "LoadBalancer",
        "externalTrafficPolicy": "Local",
        "annotations": {"cloud.google.com/l4-rbs": "enabled"},
    }
    (listener,) = _object(demo, "Gateway")["spec"]["listeners"]
    assert (listener["protocol"], listener["port"], listener["hostname"]) == ("HTTPS", 443, "models.example.com")
    (certificate,) = listener["tls"]["certificateRefs"]
    externals = {e.inputs["metadata"]["name"]: e.inputs for e in by_type(demo, ESO + "ExternalSecret")}
    assert set(externals) == {certificate["name"], "front-door-api-keys"}
    tls = externals[certificate["name"]]["spec"]
    assert tls["target"]["template"] == {"type": "kubernetes.io/tls"}
    assert tls["dataFrom"] == [{"extract": {"key": "serving-gcp-demo-tls"}}]
    assert externals["front-door-api-keys"]["spec"]["dataFrom"] == [{"extract": {"key": "serving-gcp-demo-api-keys"}}]
    store = one(demo, ESO + "SecretStore").inputs
    assert store["spec"]["provider"] == {"gcpsm": {"projectID": "mlinfra-demo-project"}}  # no key file: its identity
    assert one(demo, "gcp:container/cluster:Cluster").inputs["datapathProvider"] == "ADVANCED_DATAPATH"
    policy = one(demo, "kubernetes:networking.k8s.io/v1:NetworkPolicy").inputs
    assert policy["metadata"]["namespace"] == "models" and policy["spec"]["policyTypes"] == ["Ingress"]


ESO = "kubernetes:external-secrets.io/v1:"


def test_external_secrets_reads_the_two_secrets_as_its_own_account_only(demo):
    grants = by_type(demo, "gcp:secretmanager/secretIamMember:SecretIamMember")
    assert sorted(g.inputs["secretId"] for g in grants) == [
        "projects/mlinfra-demo-project/secrets/serving-gcp-demo-api-keys",
        "projects/mlinfra-demo-project/secrets/serving-gcp-demo-tls",
    ]
    (account,) = [a for a in by_type(demo, "gcp:serviceaccount/account:Account") if a.name == "secret-reader-account"]
    email = f"{account.inputs['accountId']}@mlinfra-demo-project.iam.gserviceaccount.com"
    assert {g.inputs["role"] for g in grants} == {"roles/secretmanager.secretAccessor"}
    assert {g.inputs["member"] for g in grants} == {f"serviceAccount:{email}"}
    assert not [
        m for m in by_type(demo, "gcp:projects/iAMMember:IAMMember") if "secretmanager" in m.inputs["role"]
    ]  # no project-wide secret role
    (binding,) = [
        b.inputs for b in by_type(demo, "gcp:serviceaccount/iAMMember:IAMMember") if b.name.startswith("secret-reader")
    ]
    assert binding["member"] == "serviceAccount:mlinfra-demo-project.svc.id.goog[external-secrets/external-secrets]"
    releases = {r.inputs["name"]: r.inputs for r in by_type(demo, "kubernetes:helm.sh/v3:Release")}
    eso = releases["external-secrets"]["values"]["serviceAccount"]
    assert eso["name"] == "external-secrets" and eso["annotations"] == {"iam.gke.io/gcp-service-account": email}


def test_an_unauthenticated_door_syncs_the_certificate_alone_and_counts_callers_by_address(tmp_path):
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.serving-gcp-demo.yaml").read_text(encoding="utf-8"))
    gateway = config["config"]["mlinfra:serving"]["gateway"]
    del gateway["apiKeysSecret"]
    gateway.update(auth="none", sourceCidrs=["198.51.100.0/24"])
    # A project of its own, sharing the repository's program and model configs.
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "__main__.py").symlink_to(ROOT / "__main__.py")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "models").symlink_to(ROOT / "stacks" / "models")
    (tmp_path / "stacks" / "Pulumi.serving-gcp-open.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    result = preview("serving-gcp-open", project=load_project(tmp_path))
    assert not result.errors, result.errors
    assert not by_type(result, "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy")
    (external,) = by_type(result, ESO + "ExternalSecret")
    assert external.inputs["spec"]["target"]["name"] == "front-door-tls"
    (grant,) = by_type(result, "gcp:secretmanager/secretIamMember:SecretIamMember")
    assert grant.inputs["secretId"].endswith("/serving-gcp-demo-tls")
    service = _object(result, "EnvoyProxy")["spec"]["provider"]["kubernetes"]["envoyService"]
    assert service["loadBalancerSourceRanges"] == ["198.51.100.0/24"]
    (rule,) = _object(result, "BackendTrafficPolicy")["spec"]["rateLimit"]["global"]["rules"][:1]
    assert rule["clientSelectors"] == [{"sourceCIDR": {"type": "Distinct", "value": "0.0.0.0/0"}}]


def test_a_cluster_created_without_dataplane_v2_enforces_policies_with_calico_in_place():
    """Dataplane V2 is chosen at creation (ForceNew); a cluster made without it keeps itself and turns on GKE's
    managed Calico instead: the add-on and the cluster's switch together."""
    result = preview("serving-gcp-demo", [("mlinfra:serving.cluster.networkPolicy", "calico")])
    assert not result.errors, result.errors
    cluster = one(result, "gcp:container/cluster:Cluster").inputs
    assert "datapathProvider" not in cluster
    assert cluster["networkPolicy"] == {"enabled": True, "provider": "CALICO"}
    assert cluster["addonsConfig"]["networkPolicyConfig"] == {"disabled": False}


def test_a_model_at_zero_on_gke_is_held_by_its_picker_and_woken_by_what_it_holds():
    result = preview(
        "serving-gcp-demo",
        [("mlinfra:serving.models[0].minReplicas", "0"), ("mlinfra:serving.models[0].scaleToZero.holdSeconds", "240")],
    )
    assert not result.errors, result.errors
    (scaler,) = by_type(result, "kubernetes:keda.sh/v1alpha1:ScaledObject")
    spec = scaler.inputs["spec"]
    assert spec["minReplicaCount"] == 0 and spec["cooldownPeriod"] >= 600
    assert any(t["name"] == "held" for t in spec["triggers"])
    (picker,) = [
        r
        for r in by_type(result, "kubernetes:helm.sh/v3:Release")
        if str(r.inputs.get("chart")).endswith("inferencepool")
    ]
    extension = picker.inputs["values"]["inferenceExtension"]
    config = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    assert config["flowControl"]["defaultRequestTTL"] == "240s"
