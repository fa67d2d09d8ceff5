"""The front door's objects (pure): each validates against its pinned CRD or the Kubernetes schema, routes every
model to its own pool, counts limits per caller, and leaves the model servers to the gateway."""

from __future__ import annotations

import pytest
import yaml

from infra.serving import front_door, gateway_charts, servers
from infra.serving.aws.config import AwsGatewaySpec, AwsModelSpec
from infra.serving.aws.front_door import (
    api_keys_reader_policy,
    envoy_service,
    load_balancer_controller_policy,
    published_policy,
    secret_store_provider,
)
from infra.serving.charts import SYSTEM_NODES
from infra.serving.manifests import selector
from tests.k8s_schemas import validate

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/0f3c2a9e-5b7d-4e21-9c8a-1d2e3f4a5b6c"
KEYS = "arn:aws:secretsmanager:us-east-1:123456789012:secret:mlinfra/api-keys-AbCdEf"
MODELS = [
    AwsModelSpec(name="llama", version="1.0", accelerator="inf2", image="neuron-vllm:1"),
    AwsModelSpec(name="mistral", version="2.0", accelerator="g5", image="vllm/vllm-openai:v0.33.0"),
]


def gateway(**changes) -> AwsGatewaySpec:
    value = {"hostname": "models.example.com", "certificateArn": CERTIFICATE, "apiKeysSecretArn": KEYS, **changes}
    return AwsGatewaySpec.model_validate(value)


def objects(spec: AwsGatewaySpec) -> list[dict]:
    return [
        front_door.gateway_class(),
        front_door.envoy_proxy(envoy_service(spec), SYSTEM_NODES),
        front_door.gateway(spec, "models"),
        front_door.security_policy(),
        front_door.traffic_policy(spec),
        front_door.client_traffic_policy(MODELS),
        front_door.ai_gateway_route(MODELS, "models"),
        front_door.model_server_network_policy("models", [gateway_charts.picker_name(m) for m in MODELS]),
        *front_door.inference_pool_reader(),
        *front_door.redis_objects(SYSTEM_NODES),
    ]


@pytest.mark.parametrize("auth", ["api-key", "none"])
def test_every_object_validates_against_its_schema(auth):
    spec = gateway(auth=auth, sourceCidrs=["198.51.100.0/24"], apiKeysSecretArn=KEYS if auth == "api-key" else None)
    for manifest in objects(spec):
        validate(manifest)


def test_each_model_name_routes_to_its_own_pool_and_request_bound():
    route = front_door.ai_gateway_route(MODELS, "models")
    rules = {r["matches"][0]["headers"][0]["value"]: r for r in route["spec"]["rules"]}
    assert set(rules) == {"llama", "mistral"}
    for model in MODELS:
        rule = rules[model.name]
        assert rule["matches"][0]["headers"][0]["name"] == front_door.MODEL_HEADER
        assert rule["backendRefs"] == [
            {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": model.name}
        ]
        assert rule["timeouts"]["request"] == f"{model.max_request_seconds}s"


def test_limits_count_each_client_over_the_whole_gateway_and_tokens_from_the_response():
    spec = gateway(rateLimits={"requestsPerMinute": 60, "tokensPerMinute": 5000})
    rules = front_door.traffic_policy(spec)["spec"]["rateLimit"]["global"]["rules"]
    assert [r["limit"] for r in rules] == [{"requests": 60, "unit": "Minute"}, {"requests": 5000, "unit": "Minute"}]
    assert all(r["shared"] for r in rules)
    for rule in rules:
        assert rule["clientSelectors"] == [{"headers": [{"name": front_door.CLIENT_HEADER, "type": "Distinct"}]}]
    assert rules[1]["cost"]["request"] == {"from": "Number", "number": 0}
    metadata = rules[1]["cost"]["response"]["metadata"]
    route = front_door.ai_gateway_route(MODELS, "models")
    assert route["spec"]["llmRequestCosts"] == [{"metadataKey": metadata["key"], "type": "TotalToken"}]
    # The header the limits count is the one the API-key filter writes.
    assert front_door.security_policy()["spec"]["apiKeyAuth"]["forwardClientIDHeader"] == front_door.CLIENT_HEADER


def test_without_auth_the_limits_count_source_addresses():
    spec = gateway(auth="none", sourceCidrs=["198.51.100.0/24"], apiKeysSecretArn=None)
    (rule,) = front_door.traffic_policy(spec)["spec"]["rateLimit"]["global"]["rules"]
    assert rule["clientSelectors"] == [{"sourceCIDR": {"type": "Distinct", "value": "0.0.0.0/0"}}]


def test_model_servers_accept_only_the_proxies_the_pickers_and_the_scraper_on_their_port():
    policy = front_door.model_server_network_policy("models", ["llama-epp", "mistral-epp"])
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "model-server"}}
    (rule,) = spec["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": servers.PORT}]
    peers = rule["from"]
    assert all("ipBlock" not in p for p in peers)  # no address range: pods have VPC addresses on EKS
    assert peers[0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": front_door.GATEWAY_NAMESPACE}
    assert peers[1]["podSelector"]["matchExpressions"][0]["values"] == ["llama-epp", "mistral-epp"]


def test_the_pickers_select_the_model_servers_and_hold_requests_only_for_a_model_at_zero():
    values = gateway_charts.inference_pool_values(MODELS[1])
    assert values["inferencePool"]["modelServers"]["matchLabels"] == selector(MODELS[1])
    assert values["inferencePool"]["targetPorts"] == [{"number": servers.PORT}]
    # v1.5.0 exits on the deprecated metric flags; its vLLM default is the KV metric the engines export.
    assert "flags" not in values["inferenceExtension"]
    assert "pluginsConfigFile" not in values["inferenceExtension"]  # the chart's default config: no flow control
    zero = MODELS[1].model_validate(
        {
            **MODELS[1].model_dump(by_alias=True, exclude_none=True),
            "minReplicas": 0,
            "scaleToZero": {"holdSeconds": 200},
        }
    )
    extension = gateway_charts.inference_pool_values(zero)["inferenceExtension"]
    config = yaml.safe_load(extension["pluginsCustomConfig"][extension["pluginsConfigFile"]])
    assert config["flowControl"]["defaultRequestTTL"] == "200s"
    # Another hold is another file name, so the picker (which reads its file at start only) rolls.
    longer = zero.model_copy(update={"scale_to_zero": zero.scale_to_zero.model_copy(update={"hold_seconds": 250})})
    assert (
        gateway_charts.inference_pool_values(longer)["inferenceExtension"]["pluginsConfigFile"]
        != extension["pluginsConfigFile"]
    )


def test_the_load_balancer_ends_tls_with_the_certificate_and_listens_on_443_only():
    spec = gateway(sourceCidrs=["198.51.100.0/24"])
    service = envoy_service(spec)
    annotations = service["annotations"]
    prefix = "service.beta.kubernetes.io/aws-load-balancer-"
    assert annotations[prefix + "ssl-cert"] == CERTIFICATE
    assert annotations[prefix + "ssl-ports"] == "443"
    assert annotations[prefix + "ssl-negotiation-policy"].startswith("ELBSecurityPolicy-TLS13")
    # The caller's own address reaches Envoy (per-address limits count callers, not the load balancer).
    assert annotations[prefix + "target-group-attributes"] == "preserve_client_ip.enabled=true"
    assert service["loadBalancerSourceRanges"] == ["198.51.100.0/24"]
    listeners = front_door.gateway(spec, "models")["spec"]["listeners"]
    assert [(item["port"], item["hostname"]) for item in listeners] == [(443, "models.example.com")]
    assert "loadBalancerSourceRanges" not in envoy_service(gateway())  # api-key auth, open to any address


def test_the_controller_policy_keeps_every_published_action_it_uses_and_narrows_the_rest():
    policy = load_balancer_controller_policy("us-east-1", "123456789012", "aws", "vpc-0abc")
    granted = {a for st in policy["Statement"] for a in st["Action"]}
    published = {
        a
        for st in published_policy()["Statement"]
        for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])
    }
    assert published - granted == {
        "waf-regional:AssociateWebACL",
        "waf-regional:DisassociateWebACL",
        "wafv2:AssociateWebACL",
        "wafv2:DisassociateWebACL",
        "shield:CreateProtection",
        "shield:DeleteProtection",
    }
    for st in policy["Statement"]:
        writes = [a for a in st["Action"] if not a.split(":")[1].startswith(("Describe", "Get", "List"))]
        if writes and st["Resource"] == "*":
            assert st.get("Condition"), st["Action"]
        if any(a in ("ec2:CreateTags", "ec2:DeleteTags") for a in st["Action"]):
            assert st["Condition"]["ForAllValues:StringLike"]["aws:TagKeys"]
    ingress = next(
        st
        for st in policy["Statement"]
        if st["Action"] == ["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"]
    )
    assert ingress["Condition"] == {"ArnEquals": {"ec2:Vpc": "arn:aws:ec2:us-east-1:123456789012:vpc/vpc-0abc"}}


def test_the_api_keys_come_from_the_one_secret_and_reach_the_policy_s_secret():
    store, external = front_door.secret_sync(secret_store_provider(KEYS), [front_door.api_keys_secret(KEYS)])
    for manifest in (store, external):
        validate(manifest)
    assert store["spec"]["provider"] == {"aws": {"service": "SecretsManager", "region": "us-east-1"}}
    assert "auth" not in store["spec"]["provider"]["aws"]  # the controller's Pod Identity, no stored access key
    assert external["spec"]["dataFrom"] == [{"extract": {"key": KEYS}}]
    assert external["spec"]["secretStoreRef"]["name"] == store["metadata"]["name"]
    (credentials,) = front_door.security_policy()["spec"]["apiKeyAuth"]["credentialRefs"]
    assert credentials["name"] == external["spec"]["target"]["name"] == front_door.API_KEYS_SECRET
    assert external["metadata"]["namespace"] == front_door.security_policy()["metadata"]["namespace"]
    assert "template" not in external["spec"]["target"]  # an Opaque Secret of the stored entries


def test_the_certificate_becomes_the_https_listener_s_tls_secret():
    """TLS at the proxies (GKE): the stored {"tls.crt", "tls.key"} object becomes a kubernetes.io/tls Secret,
    which the HTTPS listener names; without it the listener is plain HTTP behind the cloud's TLS."""
    store, external = front_door.secret_sync({"gcpsm": {"projectID": "p-123456"}}, [front_door.tls_secret("tls")])
    for manifest in (store, external):
        validate(manifest)
    assert external["spec"]["target"]["template"] == {"type": "kubernetes.io/tls"}
    assert external["spec"]["dataFrom"] == [{"extract": {"key": "tls"}}]
    ending = front_door.gateway(gateway(), "models", front_door.TLS_SECRET)
    validate(ending)
    (listener,) = ending["spec"]["listeners"]
    assert listener["protocol"] == "HTTPS" and listener["port"] == 443
    assert listener["tls"] == {
        "mode": "Terminate",
        "certificateRefs": [{"group": "", "kind": "Secret", "name": external["spec"]["target"]["name"]}],
    }
    assert external["metadata"]["namespace"] == ending["metadata"]["namespace"]  # no ReferenceGrant needed
    (plain,) = front_door.gateway(gateway(), "models")["spec"]["listeners"]
    assert plain["protocol"] == "HTTP" and "tls" not in plain


def test_the_key_reader_reads_that_secret_only():
    policy = api_keys_reader_policy(KEYS.replace("us-east-1", "eu-west-1"))
    (statement,) = policy["Statement"]
    assert statement["Resource"] == KEYS.replace("us-east-1", "eu-west-1")
    assert set(statement["Action"]) == {"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"}
    assert secret_store_provider(KEYS.replace("us-east-1", "eu-west-1"))["aws"]["region"] == "eu-west-1"


def test_the_gateway_s_own_answers_are_openai_errors():
    import json

    overrides = front_door.traffic_policy(gateway())["spec"]["responseOverride"]
    by_status = {o["match"]["statusCodes"][0]["value"]: o for o in overrides}
    assert set(by_status) == {401, 404, 429, 503}
    # A 503 of the gateway's own (a request held past its hold while a model at zero starts) says when to retry.
    assert by_status[503]["response"]["header"] == {
        "set": [{"name": "Retry-After", "value": str(front_door.RETRY_AFTER_SECONDS)}]
    }
    assert all("header" not in by_status[s]["response"] for s in (401, 404, 429))
    for status, override in by_status.items():
        assert override["source"] == "Local"  # a model server's own error passes unchanged
        body = json.loads(override["response"]["body"]["inline"])
        assert set(body["error"]) == {"message", "type", "param", "code"}, status
    assert json.loads(by_status[404]["response"]["body"]["inline"])["error"]["code"] == "model_not_found"


def test_the_body_limit_holds_the_longest_context_and_no_more():
    assert front_door.body_limit_mib(MODELS) == front_door.MIN_BODY_MIB  # 4096 tokens: 64 KiB, the floor
    long = MODELS[1].model_copy(update={"max_model_len": 1_048_576})
    assert front_door.body_limit_mib([MODELS[0], long]) == 16  # 1M tokens x 16 bytes
    policy = front_door.client_traffic_policy([MODELS[0], long])
    assert policy["spec"]["connection"]["bufferLimit"] == "16Mi"
    validate(policy)


def test_the_controller_adds_no_tag_keys_its_tagging_grant_refuses():
    """The narrowed tagging grant allows the controller's own keys only: no default tags in its values and no
    extra-tags annotation on the proxies' Service, or its security-group tagging would be denied."""
    from infra.serving.aws.front_door import CONTROLLER_TAGS, load_balancer_controller_values

    values = load_balancer_controller_values("c", "us-east-1", "vpc-0abc", SYSTEM_NODES)
    assert "defaultTags" not in values
    assert not any(k.endswith("additional-resource-tags") for k in envoy_service(gateway())["annotations"])
    assert CONTROLLER_TAGS == ("elbv2.k8s.aws/*", "service.k8s.aws/*")


def test_a_model_at_zero_stays_listed_and_its_requests_time_includes_the_hold():
    """dynamo#11536: a model that vanishes from /v1/models while at zero. AI Gateway lists the route's rules, which
    do not change with the replicas; and a held request's time runs from its arrival, so the route allows the hold
    on top of the longest run."""
    zero = MODELS[1].model_validate(
        {
            **MODELS[1].model_dump(by_alias=True, exclude_none=True),
            "minReplicas": 0,
            "scaleToZero": {"holdSeconds": 240},
        }
    )
    rules = front_door.ai_gateway_route([MODELS[0], zero], "models")["spec"]["rules"]
    listed = [rule["matches"][0]["headers"][0]["value"] for rule in rules]
    assert listed == [MODELS[0].name, zero.name]
    assert rules[1]["timeouts"]["request"] == f"{zero.max_request_seconds + 240}s"
    assert rules[0]["timeouts"]["request"] == f"{MODELS[0].max_request_seconds}s"
