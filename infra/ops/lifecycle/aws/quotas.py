"""`QuotaSource` on AWS with boto3: Service Quotas for the values, EC2 for what is in use. boto3 honours
AWS_ENDPOINT_URL, so the moto server stands in for both in the tests.

- GetServiceQuota answers the applied value; for a quota with none applied it answers NoSuchResourceException
  (Service Quotas API reference, GetServiceQuota), and then AWS's default (GetAWSDefaultServiceQuota) is the value.
- vCPUs in use: DescribeInstances in the Region, state pending or running, On-Demand only (Spot instances and those
  in a Capacity Block carry InstanceLifecycle "spot" / "capacity-block" and count elsewhere), each instance with
  its type's DefaultVCpus from DescribeInstanceTypes (the type's vCPUs, whatever CPU options it was started with;
  the catalog's figure for a type EC2 no longer describes; a type neither knows is a warning, not a guess).
- Network interfaces in use: every interface DescribeNetworkInterfaces lists in the Region, attached or not.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
from botocore.exceptions import ClientError

from infra.catalog.aws import instance_type, known_instance_types
from infra.catalog.aws.quotas import Quota, VcpuQuota, family_prefix
from infra.ops.lifecycle.quota import QuotaReadError

NOT_ON_DEMAND = ("spot", "capacity-block")


class AwsQuotas:
    def __init__(self, region: str | None, session: Any = None):
        self.session: Any = session or boto3.session.Session(region_name=region)
        self.region: str = self.session.region_name or "(the default region)"
        self._clients: dict[str, Any] = {}

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self.session.client(service)
        return self._clients[service]

    def quota_value(self, quota: Quota) -> float:
        client = self._client("service-quotas")
        codes = {"ServiceCode": quota.service_code, "QuotaCode": quota.quota_code}
        try:
            return float(client.get_service_quota(**codes)["Quota"]["Value"])
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                raise
        return float(client.get_aws_default_service_quota(**codes)["Quota"]["Value"])

    def vcpus_in_use(self, quota: VcpuQuota) -> int:
        ec2 = self._client("ec2")
        counts: Counter[str] = Counter()
        pages = ec2.get_paginator("describe_instances").paginate(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )
        for page in pages:
            for reservation in page.get("Reservations", []):
                for instance in reservation.get("Instances", []):
                    name = instance.get("InstanceType", "")
                    if instance.get("InstanceLifecycle") in NOT_ON_DEMAND or family_prefix(name) not in quota.prefixes:
                        continue
                    counts[name] += 1
        vcpus = self._default_vcpus(sorted(counts))
        return sum(count * vcpus[name] for name, count in counts.items())

    def network_interfaces_in_use(self) -> int:
        pages = self._client("ec2").get_paginator("describe_network_interfaces").paginate()
        return sum(len(page.get("NetworkInterfaces", [])) for page in pages)

    def _default_vcpus(self, names: list[str]) -> dict[str, int]:
        """DefaultVCpus of each type, one DescribeInstanceTypes call per type (a Region's running types are few),
        so one type EC2 no longer describes does not hide the others; for such a type the catalog's figure."""
        found: dict[str, int] = {}
        for name in names:
            try:
                answer = self._client("ec2").describe_instance_types(InstanceTypes=[name])
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "InvalidInstanceType":
                    raise
                answer = {}
            for item in answer.get("InstanceTypes", []):
                found[item["InstanceType"]] = int(item["VCpuInfo"]["DefaultVCpus"])
            if name not in found and name in known_instance_types():
                found[name] = instance_type(name).vcpus
        missing = [name for name in names if name not in found]
        if missing:
            raise QuotaReadError(
                f"the vCPUs of running type(s) {', '.join(missing)} are unknown (DescribeInstanceTypes does not "
                "describe them, nor does the catalog)"
            )
        return found
