"""Crafted misconfigurations of the training stacks (training-demo on AWS, training-gcp-demo on GCP)."""

from __future__ import annotations

from infra.providers import tokens as t
from tests.policies.corpus.mutations import (
    DELETE,
    Entry,
    both,
    copy_as,
    drop,
    in_document,
    option,
    relink,
    set_,
    with_statement,
)

AWS, GCP = "training-demo", "training-gcp-demo"
R = "run-demo-llama-7b-001-"
G = "run-demo-llama-7b-gcp-001-"
LT, FLEET, FS = t.AWS_EC2_LAUNCH_TEMPLATE, t.AWS_EC2_FLEET, t.AWS_FSX_LUSTRE_FILE_SYSTEM
IN, SG_RULE = t.AWS_VPC_SECURITY_GROUP_INGRESS_RULE, t.AWS_EC2_SECURITY_GROUP_RULE
ROLE, POLICY = t.AWS_IAM_ROLE, t.AWS_IAM_ROLE_POLICY
FUNCTION, SCHEDULE = t.AWS_LAMBDA_FUNCTION, t.AWS_SCHEDULER_SCHEDULE
BUCKET = "mlinfra-registry-123456789012-us-east-1"


def allow(action: object, resource: object = "*", sid: str = "Corpus", **extra: object) -> dict:
    return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource, **extra}


def _unscoped_terminate(document: dict) -> None:
    for statement in document["Statement"]:
        if "ec2:TerminateInstances" in statement.get("Action", ()):
            statement.pop("Condition", None)


def _from_cidr(name: str, cidr: str):
    """An ingress rule of the nodes' group (a copy of the Lustre one) from `cidr` instead of the group itself."""
    return both(
        copy_as(IN, f"{R}nodes-in-lustre-988", name, "cidrIpv4", cidr),
        set_(IN, name, "referencedSecurityGroupId", DELETE),
    )


def _pieces(a: str, b: str):
    """Two such rules, from CIDRs `a` and `b`."""
    return both(_from_cidr("corpus-half-a", a), _from_cidr("corpus-half-b", b))


_halves = _pieces("0.0.0.0/1", "128.0.0.0/1")


GUARD_POLICY = (POLICY, f"{R}guard-permissions")
NODE_WRITE = (POLICY, "runs-demo-1f074c")

ENTRIES = [
    # fabric and nodes
    Entry(
        "efa-card-dropped",
        AWS,
        "efa-on-every-network-card",
        set_(LT, "template", "networkInterfaces.2", DELETE),
        "one EFA card left without an interface",
    ),
    Entry(
        "efa-card-plain-eni",
        AWS,
        "efa-on-every-network-card",
        set_(LT, "template", "networkInterfaces.3.interfaceType", "interface"),
        "an EFA card given a plain ENI",
    ),
    Entry(
        "imdsv1",
        AWS,
        "instance-metadata-requires-imdsv2",
        set_(LT, "template", "metadataOptions.httpTokens", "optional"),
        "IMDSv1 accepted",
    ),
    Entry(
        "imds-hop-2",
        AWS,
        "instance-metadata-requires-imdsv2",
        set_(LT, "template", "metadataOptions.httpPutResponseHopLimit", 2),
        "containers reach the node's metadata",
    ),
    Entry(
        "root-unencrypted",
        AWS,
        "block-devices-encrypted",
        set_(LT, "template", "blockDeviceMappings.0.ebs.encrypted", "false"),
        "an unencrypted root volume",
    ),
    Entry(
        "node-public-ip",
        AWS,
        "multi-interface-instances-without-public-ip",
        set_(LT, "template", "networkInterfaces.0.associatePublicIpAddress", "true"),
        "a public IP on a node",
    ),
    Entry(
        "placement-spread",
        AWS,
        "placement-groups-use-cluster-strategy",
        set_(t.AWS_EC2_PLACEMENT_GROUP, "placement", "strategy", "spread"),
        "nodes spread across racks",
    ),
    Entry(
        "fleet-keeps-nodes",
        AWS,
        "training-compute-ends-with-the-run",
        set_(FLEET, "fleet", "terminateInstances", False),
        "nodes outlive the fleet",
    ),
    Entry(
        "shutdown-stops",
        AWS,
        "training-compute-ends-with-the-run",
        set_(LT, "template", "instanceInitiatedShutdownBehavior", "stop"),
        "powered-off nodes keep their volumes",
    ),
    Entry(
        "serving-type-in-training",
        AWS,
        "training-nodes-use-training-types",
        set_(FLEET, "fleet", "launchTemplateConfigs.0.overrides.0.instanceType", "g5.xlarge"),
        "a serving type",
    ),
    Entry(
        "template-untagged-launches",
        AWS,
        "training-launch-templates-tag-what-they-launch",
        set_(LT, "template", "tagSpecifications", DELETE),
        "instances launched without the run's tags",
    ),
    Entry(
        "subnet-public-ips",
        AWS,
        "nodes-without-public-ip",
        set_(t.AWS_EC2_SUBNET, f"{R}private", "mapPublicIpOnLaunch", True),
        "the node subnet hands out public IPs",
    ),
    # FSx for Lustre
    Entry(
        "lustre-odd-size",
        AWS,
        "lustre-capacity-allowed-step",
        set_(FS, "fs", "storageCapacity", 26500),
        "a capacity FSx refuses",
    ),
    Entry(
        "lustre-backup-unset",
        AWS,
        "lustre-final-backup-choice-explicit",
        set_(FS, "fs", "skipFinalBackup", DELETE),
        "the final backup left to the provider's default",
    ),
    Entry(
        "lustre-port-988-closed",
        AWS,
        "lustre-security-group-allows-lustre-ports",
        both(drop(IN, f"{R}lustre-in-nodes-988"), drop(IN, f"{R}lustre-in-lustre-988")),
        "clients cannot reach the MGS",
    ),
    Entry(
        "lustre-import-path",
        AWS,
        "lustre-linked-through-data-repository-associations",
        set_(FS, "fs", "importPath", f"s3://{BUCKET}/datasets/"),
        "S3 linked at creation, fixed for its life",
    ),
    Entry(
        "nodes-other-az",
        AWS,
        "efa-nodes-in-one-subnet",
        set_(FLEET, "fleet", "launchTemplateConfigs.0.overrides.0.availabilityZone", "us-east-1b"),
        "cross-AZ",
    ),
    Entry(
        "lustre-other-az",
        AWS,
        "lustre-in-same-az-as-nodes",
        both(
            copy_as(t.AWS_EC2_SUBNET, f"{R}private", "corpus-subnet-b", "availabilityZone", "us-east-1b"),
            relink(FS, "fs", "subnetIds", t.AWS_EC2_SUBNET, "corpus-subnet-b"),
        ),
        "Lustre across an AZ boundary",
    ),
    Entry(
        "efa-sg-not-self",
        AWS,
        "efa-security-group-self-referencing",
        drop(IN, f"{R}efa-in"),
        "EFA traffic between nodes refused",
    ),
    # teardown safety
    Entry(
        "fs-protected",
        AWS,
        "training-resources-not-protected",
        option(FS, "fs", protect=True),
        "the run cannot be destroyed",
    ),
    Entry(
        "fs-retained",
        AWS,
        "training-resources-not-retained",
        option(FS, "fs", retain_on_delete=True),
        "the file system outlives the run",
    ),
    Entry(
        "fs-no-run-id",
        AWS,
        "training-resources-carry-run-tags",
        set_(FS, "fs", "tags.mlinfra:run-id", DELETE),
        "the guard and reap cannot find it",
    ),
    Entry(
        "guard-logs-forever",
        AWS,
        "log-groups-have-retention",
        set_(t.AWS_CLOUDWATCH_LOG_GROUP, f"{R}guard-logs", "retentionInDays", DELETE),
        "logs kept forever",
    ),
    Entry(
        "no-expiry-schedule",
        AWS,
        "training-stack-has-run-guard",
        drop(SCHEDULE, f"{R}guard-expiry"),
        "nothing stops the run at its expiry",
    ),
    Entry(
        "schedule-flexible",
        AWS,
        "training-stack-has-run-guard",
        set_(SCHEDULE, f"{R}guard-expiry", "flexibleTimeWindow", {"mode": "FLEXIBLE", "maximumWindowInMinutes": 60}),
        "the stop may come an hour late",
    ),
    Entry(
        "completion-other-run",
        AWS,
        "training-stack-has-run-guard",
        set_(
            t.AWS_CLOUDWATCH_EVENT_RULE,
            f"{R}guard-completion",
            "eventPattern",
            '{"source": ["aws.s3"], "detail-type": ["Object Created"], "detail": {"object": {"key": '
            '[{"prefix": "runs/"}]}}}',
        ),
        "any run's end stops this one",
    ),
    Entry(
        "guard-terminates-any-run",
        AWS,
        "guard-role-scoped-to-run",
        set_(*GUARD_POLICY, "policy", in_document(_unscoped_terminate)),
        "the guard terminates every run's nodes",
    ),
    # the guard's wiring
    Entry(
        "guard-permission-removed",
        AWS,
        "run-guard-wired",
        drop(t.AWS_LAMBDA_PERMISSION, f"{R}guard-from-completion"),
        "EventBridge's calls refused",
    ),
    Entry(
        "guard-concurrency-0",
        AWS,
        "run-guard-wired",
        set_(FUNCTION, f"{R}guard-function", "reservedConcurrentExecutions", 0),
        "every invocation throttled",
    ),
    Entry(
        "guard-other-run-id",
        AWS,
        "run-guard-wired",
        set_(FUNCTION, f"{R}guard-function", "environment.variables.MLINFRA_RUN_ID", "demo-llama-7b-002"),
        "the guard stops another run",
    ),
    Entry(
        "guard-other-bucket",
        AWS,
        "run-guard-wired",
        set_(FUNCTION, f"{R}guard-function", "environment.variables.MLINFRA_REGISTRY_BUCKET", "another-registry"),
        "the guard reads another registry",
    ),
    Entry(
        "scheduler-cannot-invoke",
        AWS,
        "run-guard-wired",
        set_(
            POLICY,
            f"{R}guard-scheduler-permissions",
            "policy",
            in_document(lambda d: d.update(Statement=[allow("sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q")])),
        ),
        "the expiry schedule's calls refused",
    ),
    # IAM
    Entry(
        "node-writes-models",
        AWS,
        "training-registry-writes-own-run-only",
        set_(*NODE_WRITE, "policy", with_statement(allow("s3:PutObject", f"arn:aws:s3:::{BUCKET}/models/*"))),
        "a run overwrites released models",
    ),
    Entry(
        "node-s3-star",
        AWS,
        "registry-access-without-wildcards",
        set_(*NODE_WRITE, "policy", with_statement(allow("s3:*", f"arn:aws:s3:::{BUCKET}/*"))),
        "s3:* on the registry",
    ),
    Entry(
        "guard-passrole-any",
        AWS,
        "iam-grants-without-privilege-escalation",
        set_(*GUARD_POLICY, "policy", with_statement(allow("iam:PassRole"))),
        "the guard hands out any role",
    ),
    Entry(
        "guard-createtags-any",
        AWS,
        "iam-grants-without-privilege-escalation",
        set_(*GUARD_POLICY, "policy", with_statement(allow(["ec2:CreateTags", "ec2:DescribeInstances"]))),
        "anything retagged into the guard's scope",
    ),
    Entry(
        "node-update-function-code",
        AWS,
        "iam-grants-without-privilege-escalation",
        set_(
            *NODE_WRITE,
            "policy",
            with_statement(
                allow(
                    "lambda:UpdateFunctionCode",
                    "arn:aws:lambda:us-east-1:123456789012:function:mlinfra-guard-demo-llama-7b-001",
                )
            ),
        ),
        "a node rewrites the guard's code",
    ),
    Entry(
        "node-notaction",
        AWS,
        "iam-grants-without-privilege-escalation",
        set_(
            *NODE_WRITE,
            "policy",
            with_statement({"Sid": "All", "Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}),
        ),
        "everything but IAM",
    ),
    Entry(
        "node-write-anywhere",
        AWS,
        "iam-grants-without-privilege-escalation",
        set_(*NODE_WRITE, "policy", with_statement(allow("ec2:ModifyInstanceAttribute"))),
        "every instance",
    ),
    Entry(
        "node-admin-attached",
        AWS,
        "roles-without-broad-managed-policies",
        set_(t.AWS_IAM_ROLE_POLICY_ATTACHMENT, f"{R}ssm", "policyArn", "arn:aws:iam::aws:policy/AdministratorAccess"),
        "administrator nodes",
    ),
    Entry(
        "node-trust-anyone",
        AWS,
        "trust-policies-name-their-principals",
        set_(
            ROLE,
            f"{R}role",
            "assumeRolePolicy",
            in_document(lambda d: d["Statement"][0].update(Principal={"AWS": "*"})),
        ),
        "anyone assumes the node role",
    ),
    # security groups
    Entry(
        "ssh-from-anywhere",
        AWS,
        "ingress-not-open-to-the-internet",
        _from_cidr("corpus-ssh", "0.0.0.0/0"),
        "the internet reaches the nodes",
    ),
    Entry(
        "internet-split-over-rules",
        AWS,
        "security-groups-not-open-across-rules",
        _pieces("8.0.0.0/9", "8.128.0.0/9"),
        "a public /8 in two /9 rules, each under the internet-at-large bound, together over it",
    ),
    Entry(
        "internet-halves-in-two-rules",
        AWS,
        "ingress-not-open-to-the-internet",
        _halves,
        "0.0.0.0/1 and 128.0.0.0/1 in two rules: each half alone is the internet at large",
    ),
    Entry(
        "internet-a-public-eighth",
        AWS,
        "ingress-not-open-to-the-internet",
        _from_cidr("corpus-public-8", "11.0.0.0/8"),
        "one public /8 (16.7 million addresses), no /0 in sight",
    ),
    # GCP
    Entry(
        "gcp-node-editor",
        GCP,
        "gcp-project-grants-without-broad-roles",
        set_(t.GCP_PROJECTS_IAM_MEMBER, f"{G}logging-logwriter", "role", "roles/editor"),
        "nodes edit the project",
    ),
    Entry(
        "gcp-node-storage-admin",
        GCP,
        "gcp-project-grants-without-broad-roles",
        set_(t.GCP_PROJECTS_IAM_MEMBER, f"{G}monitoring-metricwriter", "role", "roles/storage.admin"),
        "nodes administer every bucket",
    ),
    Entry(
        "gcp-guard-owner",
        GCP,
        "gcp-project-grants-without-broad-roles",
        set_(t.GCP_PROJECTS_IAM_MEMBER, f"{G}guard-unscoped", "role", "roles/owner"),
        "the guard owns the project",
    ),
    Entry(
        "gcp-project-public",
        GCP,
        "gcp-project-grants-without-broad-roles",
        set_(t.GCP_PROJECTS_IAM_MEMBER, f"{G}logging-logwriter", "member", "allAuthenticatedUsers"),
        "any Google account writes the project's logs",
    ),
    Entry(
        "gcp-data-public",
        GCP,
        "gcs-buckets-not-granted-to-the-public",
        set_(t.GCP_STORAGE_BUCKET_IAM_MEMBER, f"{G}read", "member", "allUsers"),
        "the data bucket public",
    ),
    Entry(
        "gcp-node-public-ip",
        GCP,
        "gcp-instances-without-public-ip",
        set_(t.GCP_COMPUTE_INSTANCE, f"{G}node-0", "networkInterfaces.0.accessConfigs", [{"networkTier": "PREMIUM"}]),
        "a node on the internet",
    ),
    Entry(
        "gcp-node-unlabelled",
        GCP,
        "gcp-training-resources-labelled-with-run",
        set_(t.GCP_COMPUTE_INSTANCE, f"{G}node-0", "labels.mlinfra-run-id", DELETE),
        "the guard cannot find it",
    ),
    Entry(
        "gcp-no-guard-clock",
        GCP,
        "gcp-training-stack-has-run-guard",
        drop(t.GCP_CLOUDSCHEDULER_JOB, f"{G}guard-tick"),
        "nothing stops the run at its expiry",
    ),
    Entry(
        "gcp-no-compact-placement",
        GCP,
        "gcp-training-nodes-in-compact-placement",
        set_(t.GCP_COMPUTE_INSTANCE, f"{G}node-0", "resourcePolicies", DELETE),
        "nodes scattered",
    ),
    Entry(
        "gcp-node-missing-gpu-nic",
        GCP,
        "gcp-training-nodes-have-every-gpu-nic",
        set_(t.GCP_COMPUTE_INSTANCE, f"{G}node-0", "networkInterfaces.4", DELETE),
        "one GPU NIC missing",
    ),
]
