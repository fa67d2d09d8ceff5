"""The rules for what a security reviewer looks for beyond least privilege, through the pack's analyzer protocol:
`iam-grants-without-privilege-escalation`, `run-guard-wired`, `gcp-project-grants-without-broad-roles`,
`pods-without-host-access` and `security-groups-not-open-across-rules`. Exact messages on mutations of the demo
stacks' own previews (the corpus's entries) and on crafted resources, and the compliant shapes each rule must let
pass."""

from __future__ import annotations

import json

import pytest

from infra.providers import tokens
from infra.tools import preview_json
from infra.tools.offline.digest import to_digest
from infra.tools.offline.engine import preview
from infra.tools.policy_runner import pack_config, runner
from infra.tools.policy_runner.analyzer_client import AnalyzerClient
from infra.tools.preview_json import PolicyResource, PreviewDocument
from infra.training.aws import guard
from tests.policies.corpus import ENTRIES
from tests.policies.policy_fixtures import urn

NEW_RULES = (
    "iam-grants-without-privilege-escalation",
    "run-guard-wired",
    "gcp-project-grants-without-broad-roles",
    "pods-without-host-access",
    "security-groups-not-open-across-rules",
)
R = "run-demo-llama-7b-001-"


@pytest.fixture(scope="module")
def training():
    base = preview_json.parse(to_digest(preview("training-demo")))
    with runner.started(base) as client:
        info = client.info()
        client.configure(pack_config.resolve(info))

        def found(entry_id: str, policy: str) -> list[tuple[str, str]]:
            entry = next(e for e in ENTRIES if e.id == entry_id)
            document = PreviewDocument(
                base.project, base.stack, base.config, entry.mutate(list(base.resources)), base.providers
            )
            return [
                (v.urn.rsplit("::", 1)[-1], v.message)
                for v in runner.analyze(client, info, document).violations
                if v.policy == policy
            ]

        yield found


@pytest.fixture(scope="module")
def pack():
    with AnalyzerClient(runner.PACK_DIR, "mlinfra", "serving-demo", {"aws:region": "us-east-1"}) as client:
        client.handshake()
        client.configure_stack()
        client.configure({})
        yield client


def analyzed(pack, type_: str, props: dict, policy: str) -> list[str]:
    resource = PolicyResource(urn("serving-demo", type_, "r"), type_, "r", True, props)
    return [d.message for d in pack.analyze(resource) if d.policy == policy]


def policy_of(*statements: dict) -> dict:
    return {"role": "role-id", "policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})}


ESCALATION = "iam-grants-without-privilege-escalation"
ALLOW = {"Sid": "S", "Effect": "Allow"}


@pytest.mark.parametrize(
    "statement",
    [
        {**ALLOW, "Action": ["ec2:DescribeInstances", "autoscaling:Describe*"], "Resource": "*"},
        {
            **ALLOW,
            "Action": "autoscaling:SetDesiredCapacity",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/c": "owned"}},
        },
        {**ALLOW, "Action": "iam:PassRole", "Resource": "arn:aws:iam::123456789012:role/mlinfra-node"},
        {
            **ALLOW,
            "Action": "ec2:CreateTags",
            "Resource": "*",
            "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
        },
        {
            **ALLOW,
            "Action": "fsx:TagResource",
            "Resource": "arn:aws:fsx:us-east-1:1:task/*",
            "Condition": {"StringEquals": {"aws:RequestTag/mlinfra:run-id": "r"}},
        },
        {**ALLOW, "Action": "cloudwatch:PutMetricData", "Resource": "*"},
        {"Effect": "Deny", "NotAction": "s3:GetObject", "Resource": "*"},
    ],
)
def test_scoped_grants_pass(pack, statement):
    assert analyzed(pack, tokens.AWS_IAM_ROLE_POLICY, policy_of(statement), ESCALATION) == []


def test_the_guards_own_policy_passes(pack):
    document = guard.guard_policy("aws", "us-east-1", "123456789012", "r", "arn:f", "arn:logs", "arn:q")
    props = {"role": "role-id", "policy": json.dumps(document)}
    assert analyzed(pack, tokens.AWS_IAM_ROLE_POLICY, props, ESCALATION) == []


def test_everything_on_everything_names_each_path(pack):
    statement = {**ALLOW, "Action": "*", "Resource": "*"}
    assert analyzed(pack, tokens.AWS_IAM_ROLE_POLICY, policy_of(statement), ESCALATION) == [
        "policy statement S allows iam:PassRole (through '*') on any role, so its holder can hand an administrator's "
        "role to a service it starts; name the roles it passes",
        "policy statement S allows lambda:UpdateFunctionCode, lambda:UpdateFunctionConfiguration, which runs code of "
        "its holder's choosing with the function's role; deploy function code through the stack instead",
        "policy statement S allows ec2:CreateTags, ec2:DeleteTags, fsx:TagResource, fsx:UntagResource with no "
        "condition, so its holder can tag any resource into a run guard's scope (mlinfra:run-id); add a condition on "
        "ec2:CreateAction (tags at creation only), aws:ResourceTag/mlinfra:run-id or aws:TagKeys",
    ]


def test_inline_policies_of_a_role_are_read(pack):
    props = {
        "assumeRolePolicy": "{}",
        "inlinePolicies": [
            {"name": "x", "policy": json.dumps({"Statement": [{**ALLOW, "NotAction": ["iam:*"], "Resource": "*"}]})}
        ],
    }
    assert analyzed(pack, tokens.AWS_IAM_ROLE, props, ESCALATION) == [
        "inlinePolicies[0] statement S allows every action but iam:* (NotAction), new services included; list the "
        "actions it needs in Action"
    ]


WRITE = f"{R}role-registry-write-checkpoints-demo-llama-7b-001-runs-demo-1f074c"


@pytest.mark.parametrize(
    "entry, expected",
    [
        (
            "guard-createtags-any",
            [
                (
                    f"{R}guard-permissions",
                    "policy statement Corpus allows ec2:CreateTags with no condition, so its holder can tag any "
                    "resource into a run guard's scope (mlinfra:run-id); add a condition on ec2:CreateAction (tags at "
                    "creation only), aws:ResourceTag/mlinfra:run-id or aws:TagKeys",
                )
            ],
        ),
        (
            "node-update-function-code",
            [
                (
                    WRITE,
                    "policy statement Corpus allows lambda:UpdateFunctionCode, which runs code of its holder's "
                    "choosing with the function's role; deploy function code through the stack instead",
                )
            ],
        ),
        (
            "node-write-anywhere",
            [
                (
                    WRITE,
                    "policy statement Corpus allows ec2:ModifyInstanceAttribute on Resource '*' with no condition, "
                    "which reaches every such resource in the account; name the resources, or add a condition on "
                    "their tags",
                )
            ],
        ),
    ],
)
def test_escalation_in_the_training_demo(training, entry, expected):
    assert training(entry, ESCALATION) == expected


GUARD_FN = f"'{R}guard-function'"


@pytest.mark.parametrize(
    "entry, expected",
    [
        (
            "guard-permission-removed",
            [
                (
                    f"{R}guard-completion",
                    f"event rule '{R}guard-completion' targets guard function {GUARD_FN}, but no "
                    "aws:lambda/permission:Permission lets events.amazonaws.com invoke it from this rule, so "
                    "EventBridge's calls are refused; add one with action 'lambda:InvokeFunction', principal "
                    "'events.amazonaws.com' and sourceArn the rule's ARN",
                )
            ],
        ),
        (
            "guard-concurrency-0",
            [
                (
                    f"{R}guard-function",
                    f"guard function {GUARD_FN} has reservedConcurrentExecutions 0, which throttles every "
                    "invocation, so the run is never stopped; remove it",
                )
            ],
        ),
        (
            "guard-other-run-id",
            [
                (
                    f"{R}guard-function",
                    f"guard function {GUARD_FN} has MLINFRA_RUN_ID 'demo-llama-7b-002', but this stack's run is "
                    "'demo-llama-7b-001', so it would stop another run; set it to 'demo-llama-7b-001'",
                )
            ],
        ),
        (
            "guard-other-bucket",
            [
                (
                    f"{R}guard-function",
                    f"guard function {GUARD_FN} has MLINFRA_REGISTRY_BUCKET 'another-registry', but its completion "
                    "rule watches mlinfra-registry-123456789012-us-east-1, so it reads and reports to another "
                    "registry; set it to the bucket the rule watches",
                )
            ],
        ),
        (
            "scheduler-cannot-invoke",
            [
                (
                    f"{R}guard-expiry",
                    f"schedule '{R}guard-expiry' invokes guard function {GUARD_FN} as role "
                    f"'{R}guard-scheduler-role', whose policies do not allow lambda:InvokeFunction on it, so the "
                    "expiry never stops the run; give the role lambda:InvokeFunction on the function's ARN",
                )
            ],
        ),
    ],
)
def test_a_broken_guard_wiring_is_named(training, entry, expected):
    assert training(entry, "run-guard-wired") == expected


def test_the_internet_split_over_two_rules_is_named_on_the_group(training):
    assert training("internet-split-over-rules", "security-groups-not-open-across-rules") == [
        (
            f"{R}nodes",
            f"security group '{R}nodes' admits 8.0.0.0/9, 8.128.0.0/9 through 'corpus-half-a', 'corpus-half-b', "
            "which together admit 16,777,216 public IPv4 addresses (0.5% of them), the internet at large; allow the "
            "VPC CIDR or peer security groups instead",
        )
    ]
    # Halves are each the internet at large: the resource rule names each, the group rule adds nothing.
    assert training("internet-halves-in-two-rules", "security-groups-not-open-across-rules") == []


def test_halves_in_one_rule_are_left_to_the_resource_rule(pack):
    group = PolicyResource(
        urn("serving-demo", tokens.AWS_EC2_SECURITY_GROUP, "sg"), tokens.AWS_EC2_SECURITY_GROUP, "sg", True, {}
    )
    rule = PolicyResource(
        urn("serving-demo", tokens.AWS_EC2_SECURITY_GROUP_RULE, "both"),
        tokens.AWS_EC2_SECURITY_GROUP_RULE,
        "both",
        True,
        {
            "type": "ingress",
            "protocol": "tcp",
            "fromPort": 22,
            "toPort": 22,
            "cidrBlocks": ["8.0.0.0/9", "8.128.0.0/9"],
        },
        dependencies=(group.urn,),
        property_dependencies={"securityGroupId": (group.urn,)},
    )
    found = {(d.policy, d.urn.rsplit("::", 1)[-1]) for d in pack.analyze_stack([group, rule])}
    assert ("security-groups-not-open-across-rules", "sg") not in found
    assert [d.policy for d in pack.analyze(rule)] == ["ingress-not-open-to-the-internet"]
    inline = PolicyResource(
        group.urn,
        group.type,
        "sg",
        True,
        {"ingress": [{"protocol": "tcp", "fromPort": 22, "toPort": 22, "cidrBlocks": ["8.0.0.0/9"]}]},
    )
    other = PolicyResource(
        rule.urn,
        rule.type,
        "both",
        True,
        {**rule.props, "cidrBlocks": ["8.128.0.0/9"]},
        dependencies=rule.dependencies,
        property_dependencies=rule.property_dependencies,
    )
    assert [
        d.message for d in pack.analyze_stack([inline, other]) if d.policy == "security-groups-not-open-across-rules"
    ] == [
        "security group 'sg' admits 8.0.0.0/9, 8.128.0.0/9 through 'sg', 'both', which together admit 16,777,216 "
        "public IPv4 addresses (0.5% of them), the internet at large; allow the VPC CIDR or peer security groups "
        "instead"
    ]


PROJECT_GRANTS = "gcp-project-grants-without-broad-roles"


def test_project_grants(pack):
    member = "serviceAccount:a@p.iam.gserviceaccount.com"
    grant = {"project": "p", "role": "roles/logging.logWriter", "member": member}
    assert analyzed(pack, tokens.GCP_PROJECTS_IAM_MEMBER, grant, PROJECT_GRANTS) == []
    assert analyzed(pack, tokens.GCP_PROJECTS_IAM_MEMBER, {**grant, "role": "roles/storage.admin"}, PROJECT_GRANTS) == [
        "roles/storage.admin is granted on the whole project; grant a predefined role on the one resource it is for "
        "(a bucket, a topic, a service account), or a narrower role under an IAM condition"
    ]
    binding = {"project": "p", "role": "roles/editor", "members": [member, "allUsers"]}
    assert analyzed(pack, tokens.GCP_PROJECTS_IAM_BINDING, binding, PROJECT_GRANTS) == [
        "roles/editor is granted on the whole project; grant a predefined role on the one resource it is for (a "
        "bucket, a topic, a service account), or a narrower role under an IAM condition",
        "roles/editor is granted on the project to allUsers; grant it to the service accounts that need it instead",
    ]


PODS = "pods-without-host-access"


def daemon_set(name: str, namespace: str, volumes: list[dict], **pod: object) -> dict:
    container = {"name": "plugin", "image": "i:1", "securityContext": {"allowPrivilegeEscalation": False}}
    spec = {"containers": [container], "volumes": volumes, **pod}
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"template": {"spec": spec}}}


def test_device_plugins_mount_only_their_socket_directory(pack):
    sockets = [{"name": "dp", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}]
    plugin = daemon_set("nvidia-device-plugin-daemonset", "kube-system", sockets)
    assert analyzed(pack, tokens.K8S_DAEMON_SET, plugin, PODS) == []
    etc = [*sockets, {"name": "etc", "hostPath": {"path": "/etc"}}]
    assert analyzed(
        pack, tokens.K8S_DAEMON_SET, daemon_set("nvidia-device-plugin-daemonset", "kube-system", etc), PODS
    ) == [
        "volume 'etc' mounts the node's /etc; use an emptyDir, a ConfigMap or a CSI volume (only device plugins named "
        "in the rule's EXCEPTIONS may mount host paths)"
    ]
    elsewhere = daemon_set("nvidia-device-plugin-daemonset", "default", sockets, hostNetwork=True)
    assert analyzed(pack, tokens.K8S_DAEMON_SET, elsewhere, PODS) == [
        "the pod sets hostNetwork: true, which shares the node's network namespace with it; remove it",
        "volume 'dp' mounts the node's /var/lib/kubelet/device-plugins; use an emptyDir, a ConfigMap or a CSI volume "
        "(only device plugins named in the rule's EXCEPTIONS may mount host paths)",
    ]


def test_jobs_and_cron_jobs_are_read_where_their_pods_are(pack):
    privileged = {"containers": [{"name": "c", "securityContext": {"privileged": True}}], "hostPID": True}
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": privileged}}}
    expected = [
        "the pod sets hostPID: true, which shares the node's process IDs with it; remove it",
        "containers[0] 'c' is privileged, with every device and capability of the node; drop privileged and request "
        "the device through its resource name",
    ]
    assert analyzed(pack, tokens.K8S_JOB, job, PODS) == expected
    cron = {"metadata": {"name": "j"}, "spec": {"jobTemplate": {"spec": {"template": {"spec": privileged}}}}}
    assert analyzed(pack, tokens.K8S_CRON_JOB, cron, PODS) == expected
    assert analyzed(pack, tokens.K8S_POD, {"metadata": {"name": "p"}, "spec": privileged}, PODS) == expected


def test_every_new_rule_has_corpus_entries():
    assert sorted({e.rule for e in ENTRIES} & set(NEW_RULES)) == sorted(NEW_RULES)


def test_not_resource_grants_every_other_resource(pack):
    statement = {**ALLOW, "Action": "s3:GetObject", "NotResource": "arn:aws:s3:::secret/*"}
    assert analyzed(pack, tokens.AWS_IAM_ROLE_POLICY, policy_of(statement), ESCALATION) == [
        "policy statement S allows s3:GetObject on every resource but arn:aws:s3:::secret/* (NotResource), new ones "
        "included; name the resources in Resource"
    ]


def _guard_stack(permission: dict, permission_deps: dict[str, tuple[str, ...]]) -> list[PolicyResource]:
    tags = {"mlinfra:role": "training", "mlinfra:stack": "training-demo", "mlinfra:run-id": "r1"}
    fn_urn = urn("training-demo", tokens.AWS_LAMBDA_FUNCTION, "guard")
    rule_urn = urn("training-demo", tokens.AWS_CLOUDWATCH_EVENT_RULE, "completion")
    pattern = {"detail": {"bucket": {"name": ["reg"]}}}
    env = {"variables": {"MLINFRA_RUN_ID": "r1", "MLINFRA_REGISTRY_BUCKET": "reg"}}
    return [
        PolicyResource(
            fn_urn, tokens.AWS_LAMBDA_FUNCTION, "guard", True, {"name": "g", "tags": tags, "environment": env}
        ),
        PolicyResource(
            rule_urn,
            tokens.AWS_CLOUDWATCH_EVENT_RULE,
            "completion",
            True,
            {"name": "c", "tags": tags, "eventPattern": json.dumps(pattern)},
        ),
        PolicyResource(
            urn("training-demo", tokens.AWS_CLOUDWATCH_EVENT_TARGET, "target"),
            tokens.AWS_CLOUDWATCH_EVENT_TARGET,
            "target",
            True,
            {"rule": "c", "arn": "arn:aws:lambda:us-east-1:1:function:g"},
            dependencies=(rule_urn, fn_urn),
            property_dependencies={"rule": (rule_urn,), "arn": (fn_urn,)},
        ),
        PolicyResource(
            urn("training-demo", tokens.AWS_LAMBDA_PERMISSION, "permission"),
            tokens.AWS_LAMBDA_PERMISSION,
            "permission",
            True,
            permission,
            dependencies=tuple(u for v in permission_deps.values() for u in v),
            property_dependencies=permission_deps,
        ),
    ]


def test_a_permission_may_name_the_function_and_rule_by_literal_values(pack):
    literal = {
        "action": "lambda:InvokeFunction",
        "function": "arn:aws:lambda:us-east-1:1:function:g",
        "principal": "events.amazonaws.com",
        "sourceArn": "arn:aws:events:us-east-1:1:rule/c",
    }
    found = lambda stack: [d.message for d in pack.analyze_stack(stack) if d.policy == "run-guard-wired"]  # noqa: E731
    assert found(_guard_stack(literal, {})) == []
    assert found(_guard_stack({**literal, "function": "g"}, {})) == []
    assert found(_guard_stack({**literal, "function": "another-g"}, {})) == [
        "event rule 'completion' targets guard function 'guard', but no aws:lambda/permission:Permission lets "
        "events.amazonaws.com invoke it from this rule, so EventBridge's calls are refused; add one with action "
        "'lambda:InvokeFunction', principal 'events.amazonaws.com' and sourceArn the rule's ARN"
    ]
    assert len(found(_guard_stack({**literal, "principal": "s3.amazonaws.com"}, {}))) == 1


def test_a_whole_project_policy_is_read_binding_by_binding(pack):
    policy = {
        "bindings": [
            {"role": "roles/logging.logWriter", "members": ["serviceAccount:a@p.iam.gserviceaccount.com"]},
            {"role": "roles/owner", "members": ["user:admin@example.com"]},
            {"role": "roles/viewer", "members": ["allUsers"]},
        ]
    }
    props = {"project": "p", "policyData": json.dumps(policy)}
    assert analyzed(pack, tokens.GCP_PROJECTS_IAM_POLICY, props, PROJECT_GRANTS) == [
        "roles/owner is granted on the whole project; grant a predefined role on the one resource it is for (a "
        "bucket, a topic, a service account), or a narrower role under an IAM condition",
        "roles/viewer is granted on the project to allUsers; grant it to the service accounts that need it instead",
    ]
    assert (
        analyzed(pack, tokens.GCP_PROJECTS_IAM_POLICY, {"project": "p", "policyData": "not json"}, PROJECT_GRANTS) == []
    )
