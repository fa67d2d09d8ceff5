"""The lifecycle verbs of `python -m infra`: run, teardown, reap, audit.

The handlers only build the real adapters (Automation API; boto3 on AWS, Google's REST APIs on GCP) and
hand over to the orchestration functions, which tests drive with recording stand-ins.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from infra.core.errors import InputError, Problem
from infra.ops.lifecycle.ports import StackOpsError
from infra.ops.runtime import terminal_runtime


def add_lifecycle_parsers(verbs: Any) -> None:
    run = verbs.add_parser("run", help="check offline, deploy a training stack, watch the run, tear it down")
    run.add_argument("--stack", "-s", required=True, help="training stack: stacks/Pulumi.<stack>.yaml")
    run.add_argument("--keep", action="store_true", help="keep the stack when the run ends (until expires-at)")
    run.add_argument(
        "--skip-quota-check",
        action="store_true",
        help="do not check the run's vCPUs and network interfaces against the AWS Region's Service Quotas first",
    )
    run.set_defaults(handler=_run)

    teardown = verbs.add_parser("teardown", help="export checkpoints, destroy, audit and remove a training stack")
    teardown.add_argument("--stack", "-s", required=True, help="training stack: stacks/Pulumi.<stack>.yaml")
    teardown.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    teardown.set_defaults(handler=_teardown)

    reap = verbs.add_parser("reap", help="tear down training stacks past their expires-at (dry run by default)")
    reap.add_argument("--execute", action="store_true", help="tear the expired stacks down; default: only list them")
    reap.set_defaults(handler=_reap)

    audit = verbs.add_parser("audit", help="list every resource still carrying a run's tag; exit 1 if any")
    audit.add_argument("--run-id", required=True, help="the run id (mlinfra:run-id tag)")
    audit.add_argument("--region", help="AWS region; default: the AWS configuration's")
    audit.add_argument("--json", action="store_true", help="print the leftovers as JSON")
    audit.add_argument("--cloud", choices=("aws", "gcp"), default="aws", help="cloud of the run (default aws)")
    audit.add_argument("--project", help="GCP project of the run (with --cloud gcp); default: GOOGLE_CLOUD_PROJECT")
    audit.set_defaults(handler=_audit)


def _run(args: argparse.Namespace) -> int:
    from infra.ops.lifecycle.run import run

    config = _training_stack(args.stack)
    rt = terminal_runtime()
    quotas = None if args.skip_quota_check else run_quotas(config)
    return _reporting_failures(
        lambda: run(
            args.stack,
            _stacks(),
            run_cloud(config),
            rt,
            keep=args.keep,
            quotas=quotas,
            skip_quota_check=args.skip_quota_check,
        )
    )


def _teardown(args: argparse.Namespace) -> int:
    from infra.ops.lifecycle.teardown import teardown, training_config

    config = _training_stack(args.stack)
    if not args.yes:
        if not sys.stdin.isatty():
            raise InputError(
                Problem("--yes", "required to tear down without a terminal to confirm on (nothing was changed)")
            )
        answer = input(f"Tear down stack {args.stack} and everything of its run? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing was changed")
            return 0
    run_id = training_config(config).get("runId")
    stacks = _stacks()
    return _reporting_failures(
        lambda: teardown(
            args.stack,
            stacks,
            run_cloud(config, stacks.outputs(args.stack) if stacks.exists(args.stack) else None),
            terminal_runtime(),
            run_id=run_id if isinstance(run_id, str) else None,
        )
    )


def _reap(args: argparse.Namespace) -> int:
    from infra.ops.lifecycle.reap import reap

    stacks = _stacks()
    return _reporting_failures(
        lambda: reap(
            stacks,
            lambda stack: run_cloud(stacks.config(stack), stacks.outputs(stack)),
            terminal_runtime(),
            execute=args.execute,
        )
    )


def _audit(args: argparse.Namespace) -> int:
    from infra.ops.lifecycle.audit import audit_main, gcp_audit_main

    if args.cloud == "gcp":
        if args.region:
            raise InputError(Problem("--region", "only with --cloud aws (a GCP run is audited in its --project)"))
        return gcp_audit_main(args.run_id, args.project or os.environ.get("GOOGLE_CLOUD_PROJECT"), args.json)
    if args.project:
        raise InputError(Problem("--project", "only with --cloud gcp (an AWS run is audited in --region)"))
    return audit_main(args.run_id, args.region, args.json)


def _training_stack(stack: str) -> dict[str, Any]:
    from infra.core.project import load_project
    from infra.ops.lifecycle.target import training_stack_config

    return training_stack_config(load_project(), stack)


def _stacks():
    from infra.ops.automation import AutomationStacks

    return AutomationStacks()


def run_cloud(config: dict[str, Any], outputs: dict[str, Any] | None = None):
    """The cloud side of a training stack's run: boto3 in the AWS region it was deployed to (its outputs
    say; the stack file's region only before it has any), or Google's APIs in its GCP project with its data
    bucket."""
    if config.get("mlinfra:cloud") == "gcp":
        return _gcp_run_cloud(config)
    from infra.ops.lifecycle.aws.cloud import AwsRunCloud
    from infra.ops.lifecycle.target import deployed_region

    region = deployed_region(outputs or {}) or config.get("aws:region")
    return AwsRunCloud(region if isinstance(region, str) else None)


def run_quotas(config: dict[str, Any]):
    """Where a new AWS run's quotas are read: Service Quotas and EC2 in the stack file's region; None on GCP (its
    quotas are not checked)."""
    if config.get("mlinfra:cloud") == "gcp":
        return None
    from infra.ops.lifecycle.aws.quotas import AwsQuotas

    region = config.get("aws:region")
    return AwsQuotas(region if isinstance(region, str) else None)


def _reporting_failures(action) -> int:
    """A failed Pulumi operation is reported on one line (exit 1), not as a traceback."""
    try:
        return action()
    except StackOpsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _gcp_run_cloud(config: dict[str, Any]):
    """The GCP adapter for the stack's run: its project, its data bucket, and the name of its file system (so
    an unlabelled or unlisted one is still found and exported before the destroy)."""
    from infra.kinds import load
    from infra.ops.lifecycle.gcp.cloud import GcpRunCloud
    from infra.training.gcp.checks import chosen_zone
    from infra.training.gcp.config import GcpTrainingStackConfig
    from infra.training.gcp.plan import lustre_instance_name

    project, region = config.get("gcp:project"), config.get("gcp:region")
    if not isinstance(project, str) or not project:
        raise InputError(Problem("gcp:project", "required for a GCP training stack (nothing was changed)"))
    loaded = load(config)  # a bad config is an InputError naming the key
    if not isinstance(loaded, GcpTrainingStackConfig):
        raise InputError(Problem("mlinfra:cloud", "the GCP lifecycle takes a GCP training stack"))
    spec = loaded.training
    zone = chosen_zone(spec, region) if isinstance(region, str) else spec.zone
    names = [lustre_instance_name(project, zone, spec.run_id)] if zone else []
    return GcpRunCloud(
        project, spec.data_bucket, lustre_instances=names, region=region if isinstance(region, str) else None
    )
