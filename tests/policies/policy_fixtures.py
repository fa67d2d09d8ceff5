"""Compliant resources shaped as pulumi-aws v7 inputs arrive (camelCase, some nested booleans as the
strings the SDK declares), linked by property dependencies as the engine links them."""

from __future__ import annotations

import copy
import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from infra.providers import tokens
from infra.serving.front_door import model_server_network_policy
from infra.serving.model_shape import load_model_shape
from policies.model import Resource, Stack
from tests.helpers import ROOT

PROJECT = "mlinfra"
# A run that ends in 12 hours (the expiry rule reads the clock; its own tests pass an explicit `now`).
EXPIRES = (datetime.now(UTC) + timedelta(hours=12)).strftime("%Y-%m-%dT%H:%M:%SZ")


def urn(stack: str, type_: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{type_}::{name}"


def training_tags(stack: str = "training-demo") -> dict[str, str]:
    return {
        "mlinfra:role": "training",
        "mlinfra:stack": stack,
        "mlinfra:run-id": "run-1",
        "mlinfra:expires-at": EXPIRES,
    }


def res(
    type_: str, name: str, props: dict, stack: str = "training-demo", deps: dict | None = None, protect: bool = False
) -> Resource:
    deps = {k: tuple(urn(stack, t, n) for t, n in v) for k, v in (deps or {}).items()}
    return Resource(
        type=type_,
        props=props,
        urn=urn(stack, type_, name),
        name=name,
        protect=protect,
        dependencies=tuple(u for us in deps.values() for u in us),
        property_dependencies=deps,
    )


SG = "aws:ec2/securityGroup:SecurityGroup"
IN = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
OUT = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
SUBNET = "aws:ec2/subnet:Subnet"
LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
PG = "aws:ec2/placementGroup:PlacementGroup"
FLEET = "aws:ec2/fleet:Fleet"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
LOGS = "aws:cloudwatch/logGroup:LogGroup"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def p4d_interfaces() -> list[dict]:
    layout = [(0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (2, 0, "efa-only"), (3, 0, "efa-only")]
    return [
        {
            "networkCardIndex": c,
            "deviceIndex": d,
            "interfaceType": t,
            "subnetId": "subnet-private",
            "securityGroups": ["sg-nodes"],
            "associatePublicIpAddress": "false",
            "deleteOnTermination": "true",
        }
        for c, d, t in layout
    ]


def launch_template_props() -> dict[str, Any]:
    tags = training_tags()
    return {
        "instanceType": "p4d.24xlarge",
        "tags": tags,
        "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1},
        "instanceInitiatedShutdownBehavior": "terminate",
        "blockDeviceMappings": [
            {"deviceName": "/dev/sda1", "ebs": {"encrypted": "true", "volumeType": "gp3", "volumeSize": 200}}
        ],
        "networkInterfaces": p4d_interfaces(),
        "placement": {"availabilityZone": "us-east-1a", "groupName": "run-placement"},
        "tagSpecifications": [{"resourceType": k, "tags": tags} for k in ("instance", "volume", "network-interface")],
    }


def _rule(type_: str, name: str, group: str, props: dict, peer: str | None = None) -> Resource:
    deps = {"securityGroupId": [(SG, group)]}
    if peer:
        deps["referencedSecurityGroupId"] = [(SG, peer)]
    return res(type_, name, {"tags": training_tags(), "securityGroupId": f"sg-{group}", **props}, deps=deps)


def training_resources() -> list[Resource]:
    tags = training_tags()
    lustre_rules = []
    for group, peer in (("lustre", "lustre"), ("lustre", "nodes"), ("nodes", "lustre")):
        lustre_rules += [
            _rule(IN, f"{group}-in-{peer}-988", group, {"ipProtocol": "tcp", "fromPort": 988, "toPort": 988}, peer),
            _rule(IN, f"{group}-in-{peer}-1018", group, {"ipProtocol": "tcp", "fromPort": 1018, "toPort": 1023}, peer),
        ]
    return [
        res(
            SUBNET,
            "private",
            {"tags": tags, "availabilityZone": "us-east-1a", "cidrBlock": "10.64.0.0/18", "mapPublicIpOnLaunch": False},
        ),
        res(SG, "nodes", {"tags": tags, "description": "nodes"}),
        res(SG, "lustre", {"tags": tags, "description": "lustre"}),
        _rule(IN, "efa-in", "nodes", {"ipProtocol": "-1"}, "nodes"),
        _rule(OUT, "efa-out", "nodes", {"ipProtocol": "-1"}, "nodes"),
        _rule(OUT, "nodes-out", "nodes", {"ipProtocol": "-1", "cidrIpv4": "0.0.0.0/0"}),
        *lustre_rules,
        res(PG, "placement", {"tags": tags, "strategy": "cluster"}),
        res(
            LT,
            "template",
            launch_template_props(),
            deps={"networkInterfaces": [(SG, "nodes"), (SUBNET, "private")], "placement": [(PG, "placement")]},
        ),
        res(
            FLEET,
            "fleet",
            {
                "tags": tags,
                "type": "instant",
                "terminateInstances": True,
                "targetCapacitySpecification": {"defaultTargetCapacityType": "on-demand", "totalTargetCapacity": 4},
                "launchTemplateConfigs": [
                    {
                        "launchTemplateSpecification": {"launchTemplateId": "lt-1", "version": "1"},
                        "overrides": [{"instanceType": "p4d.24xlarge", "availabilityZone": "us-east-1a"}],
                    }
                ],
            },
            deps={"launchTemplateConfigs": [(LT, "template")]},
        ),
        res(
            FSX,
            "fs",
            {
                "tags": tags,
                "deploymentType": "PERSISTENT_2",
                "storageCapacity": 4800,
                "perUnitStorageThroughput": 250,
                "skipFinalBackup": True,
                "dataCompressionType": "LZ4",
                "subnetIds": "subnet-private",
                "securityGroupIds": ["sg-lustre"],
            },
            deps={"subnetIds": [(SUBNET, "private")], "securityGroupIds": [(SG, "lustre")]},
        ),
        res(
            DRA,
            "datasets",
            {
                "tags": tags,
                "fileSystemId": "fs-1",
                "fileSystemPath": "/datasets",
                "dataRepositoryPath": "s3://mlinfra-registry/datasets/",
            },
            deps={"fileSystemId": [(FSX, "fs")]},
        ),
        res(LOGS, "logs", {"tags": tags, "retentionInDays": 30}),
        res(ROLE, "node-role", {"tags": tags, "assumeRolePolicy": "{}"}),
        res(
            ROLE_POLICY,
            "node-role-write",
            {"role": "node-role", "policy": json.dumps(write_grant())},
            deps={"role": [(ROLE, "node-role")]},
        ),
        *guard_resources(),
    ]


EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"
EVENT_TARGET = "aws:cloudwatch/eventTarget:EventTarget"
SCHEDULE = "aws:scheduler/schedule:Schedule"
FUNCTION = "aws:lambda/function:Function"
RUN_ID = "run-1"


def completion_pattern(run_id: str = RUN_ID) -> dict:
    return {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {
            "bucket": {"name": ["mlinfra-registry"]},
            "object": {"key": [f"runs/{run_id}/_SUCCESS", f"runs/{run_id}/_FAILED"]},
        },
    }


def guard_policy(run_id: str = RUN_ID) -> dict:
    scoped = {"StringEquals": {"aws:ResourceTag/mlinfra:run-id": run_id}}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Find",
                "Effect": "Allow",
                "Action": ["ec2:DescribeInstances", "fsx:DescribeFileSystems"],
                "Resource": "*",
            },
            {
                "Sid": "Terminate",
                "Effect": "Allow",
                "Action": "ec2:TerminateInstances",
                "Resource": "*",
                "Condition": scoped,
            },
            {
                "Sid": "Filesystem",
                "Effect": "Allow",
                "Action": ["fsx:CreateDataRepositoryTask", "fsx:DeleteFileSystem"],
                "Resource": "*",
                "Condition": scoped,
            },
            {
                "Sid": "Report",
                "Effect": "Allow",
                "Action": ["s3:PutObject"],
                "Resource": f"arn:aws:s3:::mlinfra-registry/runs/{run_id}/*",
            },
        ],
    }


def guard_resources() -> list[Resource]:
    """The run guard as issue 4 declares it: a rule on the run's completion markers and a one-time schedule at
    expires-at, both invoking a function whose role may act only on resources tagged with the run id."""
    tags = training_tags()
    function_arn = "arn:aws:lambda:us-east-1:123456789012:function:guard"
    return [
        res(ROLE, "guard-role", {"tags": tags, "assumeRolePolicy": "{}"}),
        res(
            ROLE_POLICY,
            "guard-policy",
            {"role": "guard-role", "policy": json.dumps(guard_policy())},
            deps={"role": [(ROLE, "guard-role")]},
        ),
        res(LOGS, "guard-logs", {"tags": tags, "retentionInDays": 14}),
        res(
            FUNCTION,
            "guard",
            {
                "tags": tags,
                "role": "arn:aws:iam::123456789012:role/guard",
                "runtime": "python3.12",
                "handler": "guard.handler",
                "timeout": 900,
            },
            deps={"role": [(ROLE, "guard-role")]},
        ),
        res(
            EVENT_RULE,
            "guard-completion",
            {"tags": tags, "eventPattern": json.dumps(completion_pattern()), "state": "ENABLED"},
        ),
        res(
            EVENT_TARGET,
            "guard-completion-target",
            {"rule": "guard-completion", "arn": function_arn},
            deps={"rule": [(EVENT_RULE, "guard-completion")], "arn": [(FUNCTION, "guard")]},
        ),
        res(
            SCHEDULE,
            "guard-expiry",
            {
                "scheduleExpression": f"at({EXPIRES[:-1]})",
                "scheduleExpressionTimezone": "UTC",
                "flexibleTimeWindow": {"mode": "OFF"},
                "actionAfterCompletion": "DELETE",
                "target": {"arn": function_arn, "roleArn": "arn:aws:iam::123456789012:role/s"},
            },
            deps={"target": [(FUNCTION, "guard"), (ROLE, "guard-role")]},
        ),
    ]


SERVING = "serving-demo"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
HPA = "kubernetes:autoscaling/v2:HorizontalPodAutoscaler"


def serving_tags() -> dict[str, str]:
    return {"mlinfra:role": "serving", "mlinfra:stack": SERVING}


def model_architecture(config: str = "llama-3-8b") -> str:
    """The architecture annotation mlinfra writes for a committed config.json."""
    shape = load_model_shape(ROOT / "stacks" / "models" / config / "config.json")
    return json.dumps(dataclasses.asdict(shape), sort_keys=True, separators=(",", ":"))


def model_deployment(name: str = "llama", resource: str = "aws.amazon.com/neuron") -> dict:
    meta = {
        "name": name,
        "namespace": "models",
        "labels": {"app.kubernetes.io/name": "model-server", "app.kubernetes.io/instance": name},
        "annotations": {"mlinfra.io/model-architecture": model_architecture(), "mlinfra.io/precision": "bf16"},
    }
    container = {
        "name": "server",
        "image": "vllm/vllm-openai:v0.33.0",
        "args": ["--tensor-parallel-size", "2", "--max-num-seqs", "8", "--max-model-len", "4096"],
        "resources": {"requests": {"cpu": "3", resource: "1"}, "limits": {resource: "1"}},
    }
    pod = {"containers": [container], "nodeSelector": {"mlinfra.io/accelerator": "inf2"}}
    return {
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": name}},
            "template": {"metadata": {"labels": meta["labels"]}, "spec": pod},
        },
    }


def scaled_object(target: str = "llama") -> dict:
    query = f'sum(vllm:num_requests_waiting{{namespace="models",app_kubernetes_io_instance="{target}"}})'
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": target, "namespace": "models"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicaCount": 1,
            "maxReplicaCount": 4,
            "triggers": [
                {
                    "type": "prometheus",
                    "name": "queue-depth",
                    "metricType": "AverageValue",
                    "metadata": {"serverAddress": "http://prometheus", "query": query, "threshold": "4"},
                },
                {
                    "type": "prometheus",
                    "name": "kv-cache",
                    "metricType": "Value",
                    "metadata": {
                        "serverAddress": "http://prometheus",
                        "threshold": "0.8",
                        "query": "avg(vllm:gpu_cache_usage_perc)",
                    },
                },
            ],
        },
    }


def serving_resources() -> list[Resource]:
    """A serving slice: private node subnet, a tainted inf2 node group on an IMDSv2 template, one model server
    (Deployment) scaled by a KEDA ScaledObject on queue depth and KV cache, admitting the gateway only."""
    tags = serving_tags()
    on = {"stack": SERVING}
    return [
        res(
            SUBNET,
            "private-a",
            {"tags": tags, "availabilityZone": "us-east-1a", "cidrBlock": "10.80.0.0/19", "mapPublicIpOnLaunch": False},
            **on,
        ),
        res(
            LT,
            "pool-lt",
            {
                "tags": tags,
                "metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required"},
                "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}],
            },
            **on,
        ),
        res(
            NODE_GROUP,
            "pool",
            {
                "tags": tags,
                "clusterName": "c",
                "instanceTypes": ["inf2.xlarge"],
                "labels": {"mlinfra.io/accelerator": "inf2"},
                "subnetIds": ["subnet-a"],
                "launchTemplate": {"id": "lt-1", "version": "1"},
                "taints": [{"key": "aws.amazon.com/neuron", "value": "true", "effect": "NO_SCHEDULE"}],
                "scalingConfig": {"minSize": 1, "maxSize": 4, "desiredSize": 1},
            },
            deps={"subnetIds": [(SUBNET, "private-a")], "launchTemplate": [(LT, "pool-lt")]},
            **on,
        ),
        res(DEPLOYMENT, "llama-deployment", model_deployment(), **on),
        res(SCALED_OBJECT, "llama-scaler", scaled_object(), **on),
        res(tokens.K8S_NETWORK_POLICY, "model-servers", model_server_network_policy("models", ["llama-epp"]), **on),
    ]


def write_grant() -> dict:
    bucket = "arn:aws:s3:::mlinfra-registry"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "RegistryList",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": bucket,
                "Condition": {"StringLike": {"s3:prefix": ["checkpoints/run-1/*"]}},
            },
            {
                "Sid": "RegistryWrite",
                "Effect": "Allow",
                "Action": ["s3:PutObject", "s3:GetObject"],
                "Resource": [f"{bucket}/checkpoints/run-1/*"],
            },
            {
                "Sid": "RegistryKey",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                "Resource": "arn:aws:kms:us-east-1:123456789012:key/k",
            },
        ],
    }


def read_grant() -> dict:
    document = write_grant()
    document["Statement"][1]["Action"] = ["s3:GetObject", "s3:GetObjectVersion"]
    document["Statement"][2]["Action"] = ["kms:Decrypt"]
    return document


BUCKET = "aws:s3/bucket:Bucket"
KEY = "aws:kms/key:Key"
VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
NOTIFICATION = "aws:s3/bucketNotification:BucketNotification"
TLS_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": ["arn:aws:s3:::mlinfra-registry", "arn:aws:s3:::mlinfra-registry/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ],
}


def registry_resources() -> list[Resource]:
    tags = {"mlinfra:role": "registry", "mlinfra:stack": "registry"}
    on_bucket = {"bucket": [(BUCKET, "registry-bucket")]}
    return [
        res(KEY, "registry-key", {"tags": tags, "enableKeyRotation": True}, stack="registry", protect=True),
        res(
            BUCKET,
            "registry-bucket",
            {"tags": tags, "bucket": "mlinfra-registry", "forceDestroy": False},
            stack="registry",
            protect=True,
        ),
        res(
            VERSIONING,
            "registry-versioning",
            {"bucket": "mlinfra-registry", "versioningConfiguration": {"status": "Enabled"}},
            stack="registry",
            deps=on_bucket,
        ),
        res(
            PAB,
            "registry-public-access-block",
            {
                "bucket": "mlinfra-registry",
                "blockPublicAcls": True,
                "blockPublicPolicy": True,
                "ignorePublicAcls": True,
                "restrictPublicBuckets": True,
            },
            stack="registry",
            deps=on_bucket,
        ),
        res(
            SSE,
            "registry-encryption",
            {
                "bucket": "mlinfra-registry",
                "rules": [
                    {
                        "applyServerSideEncryptionByDefault": {
                            "sseAlgorithm": "aws:kms",
                            "kmsMasterKeyId": "arn:aws:kms:k",
                        },
                        "bucketKeyEnabled": True,
                    }
                ],
            },
            stack="registry",
            deps=on_bucket,
        ),
        res(
            BUCKET_POLICY,
            "registry-tls-only",
            {"bucket": "mlinfra-registry", "policy": json.dumps(TLS_ONLY)},
            stack="registry",
            deps=on_bucket,
        ),
        res(
            NOTIFICATION,
            "registry-events",
            {"bucket": "mlinfra-registry", "eventbridge": True},
            stack="registry",
            deps=on_bucket,
        ),
    ]


def changed(
    resources: list[Resource],
    name: str,
    path: str,
    value: Any = None,
    *,
    delete: bool = False,
    protect: bool | None = None,
) -> list[Resource]:
    """A copy of `resources` with one property of resource `name` set (or deleted); path 'a.b.0.c'."""
    result = []
    for r in resources:
        if r.name == name:
            props = copy.deepcopy(dict(r.props))
            if path:
                *parents, last = path.split(".")
                target: Any = props
                for part in parents:
                    target = target[int(part)] if isinstance(target, list) else target[part]
                key = int(last) if isinstance(target, list) else last
                if delete:
                    del target[key]
                else:
                    target[key] = value
            r = Resource(
                type=r.type,
                props=props,
                urn=r.urn,
                name=r.name,
                protect=r.protect if protect is None else protect,
                parent=r.parent,
                dependencies=r.dependencies,
                property_dependencies=r.property_dependencies,
            )
        result.append(r)
    return result


def without(resources: list[Resource], name: str) -> list[Resource]:
    return [r for r in resources if r.name != name]


def one(resources: list[Resource], name: str) -> Resource:
    return next(r for r in resources if r.name == name)


def stack_of(resources: list[Resource]) -> Stack:
    return Stack(resources)


def to_document(resources: list[Resource], stack: str, config: dict | None = None) -> dict[str, Any]:
    """A `pulumi preview --json` document (PreviewDigest shape) holding `resources`."""
    root = urn(stack, "pulumi:pulumi:Stack", f"{PROJECT}-{stack}")
    steps = [
        {
            "op": "create",
            "urn": root,
            "newState": {
                "urn": root,
                "type": "pulumi:pulumi:Stack",
                "custom": False,
                "inputs": {},
                "parent": "",
                "protect": False,
            },
        }
    ]
    for r in resources:
        steps.append(
            {
                "op": "create",
                "urn": r.urn,
                "newState": {
                    "urn": r.urn,
                    "type": r.type,
                    "custom": True,
                    "inputs": dict(r.props),
                    "parent": root,
                    "protect": r.protect,
                    "retainOnDelete": False,
                    "dependencies": list(r.dependencies),
                    "propertyDependencies": {k: list(v) for k, v in r.property_dependencies.items()},
                },
            }
        )
    return {"config": config or {"aws:region": "us-east-1"}, "steps": steps, "diagnostics": []}
