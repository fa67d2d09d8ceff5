"""The run guard: stops a run's spend from inside the cloud, even when the machine that started the run
is gone. The registry's completion markers (EventBridge rule) and a one-time schedule at expires-at
both invoke a small Lambda (source: run_guard/) that can act only on resources tagged with the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aliases import aliased
from components.registry.aws.access import RegistryAccess
from infra.registry.layout import runs_prefix
from infra.training.aws import guard
from infra.training.limits import GUARD_EVENT_MAX_AGE_SECONDS, GUARD_RETRY_ATTEMPTS, GUARD_TIMEOUT_SECONDS


@dataclass(frozen=True)
class RunGuardArgs:
    run_id: str
    expires_at: str
    teardown_on_completion: bool
    export_checkpoints: bool
    registry: RegistryAccess
    registry_bucket: pulumi.Input[str]
    partition: str
    region: str
    account_id: str
    tags: Mapping[str, str]


class RunGuard(pulumi.ComponentResource):
    function: aws.lambda_.Function

    def __init__(self, name: str, args: RunGuardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mlinfra:training:RunGuard", name, None, aliased(opts, "mlinfra:lifecycle:RunGuard"))
        child = pulumi.ResourceOptions(parent=self)
        tags, run_id = dict(args.tags), args.run_id
        bucket = pulumi.Output.from_input(args.registry_bucket)

        # Created before the function, with retention, so Lambda never makes an unmanaged one that
        # would outlive the run.
        logs = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=guard.log_group_name(run_id),
            retention_in_days=guard.LOG_RETENTION_DAYS,
            tags=tags,
            opts=child,
        )
        role = aws.iam.Role(
            f"{name}-role",
            assume_role_policy=json.dumps(guard.trust_policy("lambda.amazonaws.com", args.account_id)),
            description=f"mlinfra run guard of run {run_id}: acts only on resources tagged with it",
            tags=tags,
            opts=child,
        )
        reports = args.registry.grant_write(role, runs_prefix(run_id))
        # Invocations that still fail after Lambda's retries land here, with the event, for `audit` and
        # a human to see (the run's resources stay tagged, so `reap`/`teardown` can finish the job).
        self.failures = aws.sqs.Queue(
            f"{name}-failures",
            name=guard.failure_queue_name(run_id),
            message_retention_seconds=14 * 24 * 3600,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        function_arn = (
            f"arn:{args.partition}:lambda:{args.region}:{args.account_id}:function:{guard.function_name(run_id)}"
        )
        permissions = aws.iam.RolePolicy(
            f"{name}-permissions",
            role=role.id,
            policy=pulumi.Output.all(logs.arn, self.failures.arn).apply(
                lambda arns: json.dumps(
                    guard.guard_policy(
                        args.partition, args.region, args.account_id, run_id, function_arn, arns[0], arns[1]
                    )
                )
            ),
            opts=child,
        )
        self.function = aws.lambda_.Function(
            f"{name}-function",
            name=guard.function_name(run_id),
            description=f"mlinfra run guard of run {run_id}: stops compute on completion and at expiry",
            role=role.arn,
            runtime=guard.RUNTIME,
            architectures=["arm64"],
            handler=guard.HANDLER,
            code=pulumi.AssetArchive(
                {path: pulumi.FileAsset(str(file)) for path, file in guard.source_files().items()}
            ),
            timeout=GUARD_TIMEOUT_SECONDS,
            memory_size=256,
            environment=aws.lambda_.FunctionEnvironmentArgs(
                variables=bucket.apply(
                    lambda b: guard.environment(
                        run_id, b, args.teardown_on_completion, args.export_checkpoints, args.expires_at
                    )
                )
            ),
            logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="JSON", log_group=logs.name),
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[logs, permissions, reports]),
        )
        aws.lambda_.FunctionEventInvokeConfig(
            f"{name}-retries",
            function_name=self.function.name,
            maximum_retry_attempts=GUARD_RETRY_ATTEMPTS,
            maximum_event_age_in_seconds=GUARD_EVENT_MAX_AGE_SECONDS,
            destination_config=aws.lambda_.FunctionEventInvokeConfigDestinationConfigArgs(
                on_failure=aws.lambda_.FunctionEventInvokeConfigDestinationConfigOnFailureArgs(
                    destination=self.failures.arn
                )
            ),
            opts=child,
        )
        # A long export continues through the guard invoking itself; Lambda stops such chains after
        # about 16 calls unless recursion is allowed for this function (its rounds are bounded).
        aws.lambda_.FunctionRecursionConfig(
            f"{name}-recursion", function_name=self.function.name, recursive_loop="Allow", opts=child
        )

        self.completion_rule = aws.cloudwatch.EventRule(
            f"{name}-completion",
            name=guard.completion_rule_name(run_id),
            description=f"run {run_id}: completion markers in the registry",
            event_pattern=bucket.apply(lambda b: json.dumps(guard.marker_event_pattern(b, run_id))),
            tags=tags,
            opts=child,
        )
        aws.lambda_.Permission(
            f"{name}-from-completion",
            action="lambda:InvokeFunction",
            function=self.function.name,
            principal="events.amazonaws.com",
            source_arn=self.completion_rule.arn,
            opts=child,
        )
        aws.cloudwatch.EventTarget(
            f"{name}-completion-target",
            rule=self.completion_rule.name,
            arn=self.function.arn,
            retry_policy=aws.cloudwatch.EventTargetRetryPolicyArgs(**guard.RETRY_POLICY),
            opts=child,
        )

        scheduler_role = aws.iam.Role(
            f"{name}-scheduler-role",
            name=guard.scheduler_role_name(run_id),
            assume_role_policy=json.dumps(guard.trust_policy("scheduler.amazonaws.com", args.account_id)),
            description=f"mlinfra run guard of run {run_id}: the expiry schedule invokes the guard",
            tags=tags,
            opts=child,
        )
        scheduler_permissions = aws.iam.RolePolicy(
            f"{name}-scheduler-permissions",
            role=scheduler_role.id,
            policy=self.function.arn.apply(lambda arn: json.dumps(guard.scheduler_policy(arn))),
            opts=child,
        )
        # Schedules take no tags; the name carries the run id.
        self.expiry = aws.scheduler.Schedule(
            f"{name}-expiry",
            name=guard.schedule_name(run_id),
            description=f"run {run_id}: hard stop at expires-at {args.expires_at}",
            schedule_expression=guard.schedule_expression(args.expires_at),
            schedule_expression_timezone="UTC",
            flexible_time_window=aws.scheduler.ScheduleFlexibleTimeWindowArgs(mode="OFF"),
            target=aws.scheduler.ScheduleTargetArgs(
                arn=self.function.arn,
                role_arn=scheduler_role.arn,
                input=json.dumps(guard.EXPIRE_EVENT),
                retry_policy=aws.scheduler.ScheduleTargetRetryPolicyArgs(**guard.RETRY_POLICY),
            ),
            action_after_completion="NONE",  # keep it: Pulumi's state should match the account
            opts=pulumi.ResourceOptions(parent=self, depends_on=[scheduler_permissions]),
        )
        self.register_outputs(
            {
                "functionArn": self.function.arn,
                "completionRuleArn": self.completion_rule.arn,
                "expiryScheduleArn": self.expiry.arn,
                "failureQueueArn": self.failures.arn,
            }
        )
