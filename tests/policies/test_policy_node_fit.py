"""model-servers-fit-their-nodes: a model server's pod against what its pools' nodes leave for pods, on a saved
preview's resources (the same estimates as the config check), on both clouds."""

from policies.rules.serving import model_servers_fit_their_nodes as rule
from tests.policies.policy_fixtures import DEPLOYMENT, SERVING, changed, model_deployment, res, serving_resources

NODE_POOL = "gcp:container/nodePool:NodePool"


def fit(resources):
    from tests.policies.test_policy_serving_rules import run

    return [f.message for f in run(rule, resources)]


def neuron(cpu: str, memory: str, types: list[str], **more_requests: str) -> list:
    stack = changed(serving_resources(), "pool", "instanceTypes", types)
    requests = {"cpu": cpu, "memory": memory, "aws.amazon.com/neuron": "1", **more_requests}
    return changed(stack, "llama-deployment", "spec.template.spec.containers.0.resources.requests", requests)


def test_the_compliant_model_server_fits_its_nodes():
    assert fit(serving_resources()) == []
    assert fit(neuron("4", "24Gi", ["inf2.xlarge", "inf2.8xlarge"])) == []


def test_a_replica_no_type_holds_is_a_violation_with_the_figures():
    # The demo's Neuron entry at 40 CPU and 200 GiB: an inf2.8xlarge (32 vCPU, 128 GiB) leaves 31.6 and 126.0.
    assert fit(neuron("40", "200Gi", ["inf2.xlarge", "inf2.8xlarge"])) == [
        "model server 'llama-deployment' asks for 40 CPU, 200.0 GiB of memory and 1 accelerator(s) per pod, but no "
        "node of its inf2 pools holds it (inf2.xlarge leaves 3.7 CPU, 14.0 GiB, 0 GiB of disk and 1 accelerator(s); "
        "inf2.8xlarge leaves 31.6 CPU, 126.0 GiB, 0 GiB of disk and 1 accelerator(s); kubelet and DaemonSet "
        "reservations, estimated): its pods would stay Pending; lower the requests or add a larger type (or "
        "diskGib) to the pool"
    ]


def test_local_disk_counts_against_the_root_volume():
    big_copy = neuron("4", "24Gi", ["inf2.8xlarge"], **{"ephemeral-storage": "170Gi"})
    sized = changed(big_copy, "pool-lt", "blockDeviceMappings", [{"ebs": {"volumeSize": 200, "encrypted": "true"}}])
    (message,) = fit(sized)
    assert "170 GiB of local disk" in message and "140 GiB of disk" in message  # 200 x 0.9 - 40
    roomy = changed(sized, "pool-lt", "blockDeviceMappings", [{"ebs": {"volumeSize": 234, "encrypted": "true"}}])
    assert fit(roomy) == []


def test_the_largest_init_step_counts_when_it_asks_more_than_the_server():
    stack = neuron("2", "8Gi", ["inf2.xlarge"])
    step = {"name": "fetch", "resources": {"requests": {"cpu": "500m", "memory": "20Gi"}}}
    (message,) = fit(changed(stack, "llama-deployment", "spec.template.spec.initContainers", [step]))
    assert message.startswith("model server 'llama-deployment' asks for 2 CPU, 20.0 GiB of memory")


def test_gke_counts_the_fuse_sidecar_it_injects():
    pool = {
        "nodeConfig": {"machineType": "g2-standard-8", "labels": {"mlinfra.io/accelerator": "l4"}},
        "autoscaling": {"totalMinNodeCount": 1, "totalMaxNodeCount": 4},
    }
    server = model_deployment(resource="nvidia.com/gpu")
    server["spec"]["template"]["spec"]["nodeSelector"] = {"mlinfra.io/accelerator": "l4"}
    server["spec"]["template"]["metadata"]["annotations"] = {"gke-gcsfuse/volumes": "true"}
    requests = server["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    requests.update({"cpu": "6", "memory": "27.6Gi", "nvidia.com/gpu": "1"})
    stack = [res(NODE_POOL, "l4", pool, stack=SERVING), res(DEPLOYMENT, "m", server, stack=SERVING)]
    (message,) = fit(stack)  # 27.6 GiB + the sidecar's 256 MiB over the 27.7 a g2-standard-8 leaves
    assert "asks for 6.25 CPU, 27.9 GiB of memory" in message and "g2-standard-8 leaves 7.6 CPU, 27.7 GiB" in message
    requests["memory"] = "27Gi"
    assert fit([stack[0], res(DEPLOYMENT, "m", server, stack=SERVING)]) == []


def test_a_template_the_document_does_not_link_leaves_the_disk_unjudged():
    # A `pulumi preview --json` of unchanged resources may carry no property dependencies: the root volume is then
    # unknown, and only CPU, memory and accelerators are judged.
    stack = neuron("4", "24Gi", ["inf2.8xlarge"], **{"ephemeral-storage": "170Gi"})
    unlinked = [type(r)(r.type, r.props, urn=r.urn, name=r.name) if r.name == "pool" else r for r in stack]
    assert fit(unlinked) == []
    assert fit(stack) != []  # linked: the fixture's template sets no size, so EKS's 20 GiB default holds nothing


def test_the_pack_flags_an_unschedulable_server_on_a_saved_preview(tmp_path):
    """A saved `preview --json` of serving-demo whose Neuron server asks for 40 CPU and 200 GiB (what the config
    check refuses at preview) fails the pack through its analyzer protocol, naming the rule and the Deployment."""
    import json

    from tests.helpers import run_cli

    done = run_cli("preview", "--stack", "serving-demo", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    servers = [
        s["newState"]
        for s in document["steps"]
        if s["newState"]["type"] == "kubernetes:apps/v1:Deployment" and "neuron" in s["newState"]["urn"]
    ]
    assert len(servers) == 1
    (container,) = servers[0]["inputs"]["spec"]["template"]["spec"]["containers"]
    container["resources"]["requests"].update(cpu="40", memory="200Gi")
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    checked = run_cli("policy", "--preview-json", str(path), "--json")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    found = [v for v in json.loads(checked.stdout)["violations"] if v["policy"] == rule.NAME]
    assert [v["urn"] for v in found] == [servers[0]["urn"]]
    assert "asks for 40 CPU, 200.0 GiB of memory, 30 GiB of local disk" in found[0]["message"]
    assert "inf2.8xlarge leaves 31.6 CPU, 126.0 GiB, 140 GiB of disk" in found[0]["message"]
