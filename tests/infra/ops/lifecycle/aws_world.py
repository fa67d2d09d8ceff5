"""A training run laid out in the emulator as the training stack leaves it, and the registry bucket."""

from __future__ import annotations

from dataclasses import dataclass, field

from run_guard import actions

REGION = "us-east-1"
REGISTRY = "mlinfra-registry-test"
AMI = "ami-12c6146b"  # one of moto's built-in images


@dataclass
class Run:
    run_id: str
    vpc_id: str
    subnet_id: str
    instance_ids: list[str]
    file_system_id: str | None
    tags: list[dict[str, str]] = field(default_factory=list)


def run_tags(run_id: str) -> list[dict[str, str]]:
    return [
        {"Key": "mlinfra:run-id", "Value": run_id},
        {"Key": "mlinfra:role", "Value": "training"},
        {"Key": "mlinfra:stack", "Value": f"training-{run_id}"},
        {"Key": "mlinfra:expires-at", "Value": "2026-11-21T12:00:00Z"},
    ]


def make_run(
    aws,
    run_id: str,
    nodes: int = 2,
    lustre: bool = True,
    deployment_type: str = "SCRATCH_2",
    export_checkpoints: bool = True,
    linked: bool = True,
) -> Run:
    """A run as the training stack leaves it: a tagged VPC and subnet, tagged nodes, a tagged file system
    (SCRATCH_2, as training-demo) linked to the registry: datasets/ imported, /checkpoints exported to
    checkpoints/<run-id>/ (components/training/aws/filesystem.py)."""
    tags = run_tags(run_id)
    vpc = aws.ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": tags}])["Vpc"][
        "VpcId"
    ]
    subnet = aws.ec2.create_subnet(
        VpcId=vpc,
        CidrBlock="10.0.0.0/24",
        AvailabilityZone=f"{REGION}a",
        TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
    )["Subnet"]["SubnetId"]
    reservation = aws.ec2.run_instances(
        ImageId=AMI,
        MinCount=nodes,
        MaxCount=nodes,
        InstanceType="t3.micro",
        SubnetId=subnet,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    fs_id = None
    if lustre:
        lustre_config = {"DeploymentType": deployment_type}
        if deployment_type.startswith("PERSISTENT"):
            lustre_config["PerUnitStorageThroughput"] = 125
        fs_id = aws.fsx.create_file_system(
            FileSystemType="LUSTRE",
            StorageCapacity=1200,
            SubnetIds=[subnet],
            Tags=tags,
            LustreConfiguration=lustre_config,
        )["FileSystem"]["FileSystemId"]
        # As components/training/aws/filesystem.py links them: datasets imported, checkpoints exported automatically.
        links = [("/datasets", "datasets/", {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}})]
        if export_checkpoints:
            links.append(
                ("/checkpoints", f"checkpoints/{run_id}/", {"AutoExportPolicy": {"Events": ["NEW", "CHANGED"]}})
            )
        if deployment_type == "SCRATCH_1" or not linked:
            # SCRATCH_1 takes no data repository associations; `linked` False: the launcher died while FSx created
            # the file system, before its associations were made
            links = []
        for fs_path, prefix, s3 in links:
            aws.fsx.create_data_repository_association(
                FileSystemId=fs_id,
                FileSystemPath=fs_path,
                S3=s3,
                DataRepositoryPath=f"s3://{REGISTRY}/{prefix}",
                Tags=tags,
            )
    return Run(run_id, vpc, subnet, [i["InstanceId"] for i in reservation["Instances"]], fs_id, tags)


def make_registry(aws) -> str:
    """The registry bucket: versioned, SSE-KMS by default, with a checkpoint, a model and a marker."""
    key = aws.kms.create_key()["KeyMetadata"]["Arn"]
    aws.s3.create_bucket(Bucket=REGISTRY)
    aws.s3.put_bucket_versioning(Bucket=REGISTRY, VersioningConfiguration={"Status": "Enabled"})
    aws.s3.put_bucket_encryption(
        Bucket=REGISTRY,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key},
                    "BucketKeyEnabled": True,
                }
            ]
        },
    )
    for name in (
        "checkpoints/run-a/step-100/model.pt",
        "checkpoints/run-a/step-200/model.pt",
        "models/llm/1/cuda/model.safetensors",
        "datasets/shard-0000.tar",
    ):
        aws.s3.put_object(Bucket=REGISTRY, Key=name, Body=b"x")
    return REGISTRY


def object_versions(aws, bucket: str = REGISTRY) -> set[tuple[str, str, str]]:
    """(key, version id, etag) of every version and delete marker in the bucket."""
    found = set()
    for page in aws.s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for version in page.get("Versions", []):
            found.add((version["Key"], version["VersionId"], version["ETag"]))
        for marker in page.get("DeleteMarkers", []):
            found.add((marker["Key"], marker["VersionId"], "delete-marker"))
    return found


def file_system_state(aws, fs_id: str) -> str:
    """The file system's Lifecycle, or "gone" once FSx no longer lists it."""
    found = [fs for fs in aws.fsx.describe_file_systems()["FileSystems"] if fs["FileSystemId"] == fs_id]
    return found[0]["Lifecycle"] if found else "gone"


def instance_states(aws, ids: list[str]) -> dict[str, str]:
    pages = aws.ec2.get_paginator("describe_instances").paginate(InstanceIds=ids)
    return {i["InstanceId"]: i["State"]["Name"] for page in pages for r in page["Reservations"] for i in r["Instances"]}


def export_task(aws, fs_id: str, run_id: str = "run-a", tagged: bool = True) -> str:
    """An export task started by someone else (the guard tags its tasks with the run), after turning
    off automatic export as anyone must first."""
    assert actions.stop_automatic_export(aws.fsx, fs_id, "checkpoints") is None
    tags = {"Tags": [{"Key": "mlinfra:run-id", "Value": run_id}]} if tagged else {}
    return aws.fsx.create_data_repository_task(
        Type="EXPORT_TO_REPOSITORY", FileSystemId=fs_id, Paths=["checkpoints"], Report={"Enabled": False}, **tags
    )["DataRepositoryTask"]["TaskId"]
