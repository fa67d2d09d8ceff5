"""A training run laid out in the emulator as the training stack leaves it, and the registry bucket."""
from __future__ import annotations

from dataclasses import dataclass, field

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
    return [{"Key": "mlinfra:run-id", "Value": run_id}, {"Key": "mlinfra:role", "Value": "training"},
            {"Key": "mlinfra:stack", "Value": f"training-{run_id}"},
            {"Key": "mlinfra:expires-at", "Value": "2026-11-21T12:00:00Z"}]


def make_run(aws, run_id: str, nodes: int = 2, lustre: bool = True) -> Run:
    """A run as the training stack leaves it: a tagged VPC and subnet, tagged nodes, a tagged file system."""
    tags = run_tags(run_id)
    vpc = aws.ec2.create_vpc(CidrBlock="10.0.0.0/16",
                             TagSpecifications=[{"ResourceType": "vpc", "Tags": tags}])["Vpc"]["VpcId"]
    subnet = aws.ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24", AvailabilityZone=f"{REGION}a",
                                   TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}])["Subnet"]["SubnetId"]
    reservation = aws.ec2.run_instances(ImageId=AMI, MinCount=nodes, MaxCount=nodes, InstanceType="t3.micro",
                                        SubnetId=subnet,
                                        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    fs_id = None
    if lustre:
        fs_id = aws.fsx.create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet], Tags=tags,
            LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125},
        )["FileSystem"]["FileSystemId"]
    return Run(run_id, vpc, subnet, [i["InstanceId"] for i in reservation["Instances"]], fs_id, tags)


def make_registry(aws) -> str:
    """The registry bucket: versioned, SSE-KMS by default, with a checkpoint, a model and a marker."""
    key = aws.kms.create_key()["KeyMetadata"]["Arn"]
    aws.s3.create_bucket(Bucket=REGISTRY)
    aws.s3.put_bucket_versioning(Bucket=REGISTRY, VersioningConfiguration={"Status": "Enabled"})
    aws.s3.put_bucket_encryption(Bucket=REGISTRY, ServerSideEncryptionConfiguration={"Rules": [{
        "ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key},
        "BucketKeyEnabled": True}]})
    for name in ("checkpoints/run-a/step-100/model.pt", "checkpoints/run-a/step-200/model.pt",
                 "models/llm/1/cuda/model.safetensors", "datasets/shard-0000.tar"):
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


def instance_states(aws, ids: list[str]) -> dict[str, str]:
    pages = aws.ec2.get_paginator("describe_instances").paginate(InstanceIds=ids)
    return {i["InstanceId"]: i["State"]["Name"] for page in pages for r in page["Reservations"] for i in r["Instances"]}
