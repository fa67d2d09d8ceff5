"""The GCP run guard: stops a run's spend from inside the cloud, even when the machine that started the run is
gone. A Cloud Run function (source: run_guard_gcp/) hears the run's completion marker through a Cloud Storage
notification on runs/<run-id>/_ and a Cloud Scheduler tick every minute, both published to the run's own Pub/Sub
topic; from the marker (or expires-at) on, each event takes one step: delete the nodes, export /checkpoints,
delete Managed Lustre once the export succeeded. Decisions: infra/training/gcp/guard.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.training.gcp.node_account import prefix_grant
from infra.registry.layout import runs_prefix
from infra.training.gcp import guard


@dataclass(frozen=True)
class GcpRunGuardArgs:
    run_id: str
    project: str
    region: str
    zone: str
    data_bucket: str
    lustre_instance: str  # full name of the run's Managed Lustre instance
    expires_at: str
    teardown_on_completion: bool
    export_checkpoints: bool
    labels: Mapping[str, str]


def source_archive() -> tuple[str, pulumi.AssetArchive]:
    """(file name, archive) of the function's source; the name carries a hash of the files, so a change of code
    is a new object and a new build."""
    files = guard.source_files()
    digest = hashlib.sha256()
    for path, file in files.items():
        digest.update(path.encode() + b"\0" + file.read_bytes())
    archive = pulumi.AssetArchive({path: pulumi.FileAsset(str(file)) for path, file in files.items()})
    return f"run_guard_gcp-{digest.hexdigest()[:16]}.zip", archive


class GcpRunGuard(pulumi.ComponentResource):
    function: gcp.cloudfunctionsv2.Function

    def __init__(self, name: str, args: GcpRunGuardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:GcpRunGuard", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        run_id, project, region, labels = args.run_id, args.project, args.region, dict(args.labels)

        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            account_id=guard.service_account_id(run_id),
            project=project,
            display_name=f"mlinfra run guard {run_id}",
            description=f"mlinfra run guard of run {run_id}: acts only on this run's nodes and file system",
            opts=child,
        )
        member = self.account.email.apply(lambda email: f"serviceAccount:{email}")
        within = pulumi.ResourceOptions(parent=self.account)
        role = gcp.projects.IAMCustomRole(
            f"{name}-role",
            project=project,
            role_id=guard.custom_role_id(run_id),
            title=f"mlinfra run guard {run_id}"[:100],
            description="List nodes; export and delete Managed Lustre (IAM conditions cannot scope these)",
            permissions=list(guard.UNSCOPED_PERMISSIONS),
            opts=within,
        )
        grants: list[pulumi.Resource] = [
            gcp.projects.IAMMember(f"{name}-unscoped", project=project, role=role.name, member=member, opts=within),
            gcp.projects.IAMMember(
                f"{name}-nodes",
                project=project,
                role=guard.NODE_ROLE,
                member=member,
                condition=gcp.projects.IAMMemberConditionArgs(
                    title="mlinfra-guard-run-nodes", expression=guard.node_condition(project, args.zone, run_id)
                ),
                opts=within,
            ),
        ]
        for what, role_name, prefix in (
            ("read", guard.REPORT_READER, runs_prefix(run_id)),
            ("write", guard.REPORT_WRITER, runs_prefix(run_id) + "guard/"),
        ):
            grants.append(
                prefix_grant(
                    f"{name}-{what}", args.data_bucket, role_name, member, (prefix,), f"mlinfra-guard-{what}", within
                )
            )

        # The marker's notification and the ticks both publish to the run's own topic.
        self.topic = gcp.pubsub.Topic(
            f"{name}-topic", name=guard.resource_name(run_id), project=project, labels=labels, opts=child
        )
        storage_agent = gcp.storage.get_project_service_account_output(project=project)
        publishes = gcp.pubsub.TopicIAMMember(
            f"{name}-storage-publishes",
            topic=self.topic.id,
            role=guard.PUBLISHER,
            member=storage_agent.email_address.apply(lambda email: f"serviceAccount:{email}"),
            opts=pulumi.ResourceOptions(parent=self.topic),
        )
        self.notification = gcp.storage.Notification(
            f"{name}-markers",
            bucket=args.data_bucket,
            topic=self.topic.id,
            payload_format="JSON_API_V1",
            event_types=["OBJECT_FINALIZE"],
            object_name_prefix=guard.marker_prefix(run_id),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[publishes]),
        )

        # The source lies beside the guard's reports in the data bucket (a bucket of its own would need its own
        # key and versioning, as every bucket here must, and would outlive nothing the destroy does not remove).
        object_name, archive = source_archive()
        code = gcp.storage.BucketObject(
            f"{name}-code",
            bucket=args.data_bucket,
            name=guard.source_object(run_id, object_name),
            source=archive,
            content_type="application/zip",
            opts=child,
        )
        self.function = gcp.cloudfunctionsv2.Function(
            f"{name}-function",
            name=guard.resource_name(run_id),
            project=project,
            location=region,
            description=f"mlinfra run guard of run {run_id}: stops its nodes and file system",
            labels=labels,
            build_config=gcp.cloudfunctionsv2.FunctionBuildConfigArgs(
                runtime=guard.RUNTIME,
                entry_point=guard.ENTRY_POINT,
                source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceArgs(
                    storage_source=gcp.cloudfunctionsv2.FunctionBuildConfigSourceStorageSourceArgs(
                        bucket=args.data_bucket, object=code.name
                    )
                ),
            ),
            service_config=gcp.cloudfunctionsv2.FunctionServiceConfigArgs(
                min_instance_count=0,
                max_instance_count=1,  # one step at a time: events that meet a busy instance are redelivered
                max_instance_request_concurrency=1,
                available_memory=guard.MEMORY,
                timeout_seconds=guard.TIMEOUT_SECONDS,
                environment_variables=guard.environment(
                    project,
                    run_id,
                    args.data_bucket,
                    args.lustre_instance,
                    args.expires_at,
                    args.teardown_on_completion,
                    args.export_checkpoints,
                ),
                ingress_settings="ALLOW_INTERNAL_ONLY",
                all_traffic_on_latest_revision=True,
                service_account_email=self.account.email,
            ),
            event_trigger=gcp.cloudfunctionsv2.FunctionEventTriggerArgs(
                trigger_region=region,
                event_type=guard.EVENT_TYPE,
                pubsub_topic=self.topic.id,
                retry_policy=guard.RETRY_POLICY,
                service_account_email=self.account.email,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants),
        )
        gcp.cloudrunv2.ServiceIamMember(
            f"{name}-invoker",
            project=project,
            location=region,
            name=self.function.name,  # the function's Cloud Run service carries its name
            role=guard.INVOKER,
            member=member,
            opts=pulumi.ResourceOptions(parent=self.function),
        )
        self.tick = gcp.cloudscheduler.Job(
            f"{name}-tick",
            name=guard.tick_job_name(run_id),
            project=project,
            region=region,
            description=f"run {run_id}: the guard's clock (it acts from expires-at {args.expires_at} on)",
            schedule=guard.tick_schedule(),
            time_zone=guard.TIME_ZONE,
            pubsub_target=gcp.cloudscheduler.JobPubsubTargetArgs(
                topic_name=self.topic.id, attributes=dict(guard.TICK_ATTRIBUTES)
            ),
            retry_config=gcp.cloudscheduler.JobRetryConfigArgs(retry_count=0),  # the next tick is a minute away
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.function]),
        )
        self.register_outputs(
            {
                "function": self.function.name,
                "topic": self.topic.id,
                "tickJob": self.tick.name,
                "serviceAccount": self.account.email,
            }
        )
