"""The promotion verbs of `python -m infra`: promote, rollback. The handlers build the real adapters
(Automation API, boto3, kubectl) and hand over to `promote.promote` / `promote.rollback`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from infra.ops.promotion.quality import DEFAULT_MAX_PERPLEXITY_INCREASE, DEFAULT_MAX_TASK_DROP
from infra.ops.runtime import terminal_runtime
from infra.serving.variants import VARIANT_NAMES


def add_promotion_parsers(verbs: Any) -> None:
    promote = verbs.add_parser(
        "promote", help="convert a finished run's checkpoint, register a version, move an alias, roll out"
    )
    promote.add_argument(
        "--run-id", required=True, help="training run whose final checkpoint is promoted (needs runs/<id>/_SUCCESS)"
    )
    promote.add_argument("--model", required=True, help="model name in the registry (models/<name>/)")
    promote.add_argument("--version", required=True, help="new, never used version (versions are immutable)")
    promote.add_argument(
        "--variants",
        help=f"comma-separated, from {', '.join(VARIANT_NAMES)} (default: the variants the stack's entries of the "
        "model serve); a quantised variant needs a node pool of the serving stack whose devices run it",
    )
    promote.add_argument(
        "--checkpoint",
        metavar="PREFIX",
        help="checkpoint to promote, a prefix under checkpoints/<run-id>/ (default: the highest "
        "step-N/checkpoint-N/ckpt-N/global_stepN directory, else the run's root)",
    )
    promote.add_argument(
        "--calibration-data",
        metavar="PREFIX",
        help="registry prefix datasets/calibration/<name>/ a calibrated quantiser (cuda-int4, cuda-int8) reads",
    )
    promote.add_argument(
        "--eval-data",
        metavar="PREFIX",
        help="registry prefix datasets/evals/<name>/ of the quality gate's fixed evaluation (quantised variants)",
    )
    promote.add_argument(
        "--max-perplexity-increase",
        type=float,
        help="quality gate: held-out perplexity at most this much above the bf16 reference's, relative "
        f"(default {DEFAULT_MAX_PERPLEXITY_INCREASE})",
    )
    promote.add_argument(
        "--max-task-drop",
        type=float,
        help=f"quality gate: exact match at most this share below the reference's (default {DEFAULT_MAX_TASK_DROP})",
    )
    _common(promote)
    promote.add_argument("--dry-run", action="store_true", help="check and print the plan; start and write nothing")
    promote.set_defaults(handler=_promote)

    rollback = verbs.add_parser("rollback", help="move a model's alias back to its previous version and roll out")
    rollback.add_argument("--model", required=True, help="model name in the registry")
    _common(rollback)
    rollback.set_defaults(handler=_rollback)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alias", default="production", help="alias to move (default: production)")
    parser.add_argument(
        "--stack",
        "-s",
        required=True,
        help="serving stack whose model entry follows the alias (its config is changed and `pulumi up` run)",
    )


def _promote(args: argparse.Namespace) -> int:
    from infra.ops.promotion import promote, request

    req = request.promotion(
        args.run_id,
        args.model,
        args.version,
        args.variants,
        args.alias,
        args.stack,
        args.checkpoint,
        calibration=args.calibration_data,
        evaluation=args.eval_data,
        max_perplexity_increase=args.max_perplexity_increase,
        max_task_drop=args.max_task_drop,
    )
    _serving_stack_file(args.stack)
    stacks = _stacks()
    with _kubeconfig_dir() as directory:
        return _reporting(
            lambda: promote.promote(
                req,
                stacks,
                _store,
                lambda stack: _jobs(stacks, stack, directory),
                terminal_runtime(),
                dry_run=args.dry_run,
            )
        )


def _rollback(args: argparse.Namespace) -> int:
    from infra.ops.promotion import promote, request

    req = request.rollback(args.model, args.alias, args.stack)
    _serving_stack_file(args.stack)
    stacks = _stacks()
    return _reporting(lambda: promote.rollback(req, stacks, _store, terminal_runtime()))


def _serving_stack_file(stack: str) -> None:
    """Bad --stack is bad input (exit 2) before any backend is asked."""
    from infra.core.errors import InputError, Problem
    from infra.core.project import load_project, stack_config

    kind = stack_config(load_project(), stack).get("mlinfra:kind")
    if kind != "serving":
        raise InputError(
            Problem("--stack", f"'{stack}' is a {kind or 'kind-less'} stack; promotion takes a serving stack")
        )


def _stacks():
    from infra.ops.automation import AutomationStacks

    return AutomationStacks()


def _store(bucket: str, region: str):
    from infra.ops.promotion.s3 import S3Store

    return S3Store(bucket, region or None)


@contextlib.contextmanager
def _kubeconfig_dir() -> Iterator[str]:
    """A private directory for the kubeconfig, removed (with it) when the command ends, however it ends."""
    with tempfile.TemporaryDirectory(prefix="mlinfra-kubeconfig-") as directory:
        os.chmod(directory, 0o700)
        yield directory


def _jobs(stacks: Any, stack: str, directory: str):
    """kubectl with the serving stack's kubeconfig output (it calls `aws eks get-token`), written into
    `directory` (removed by _kubeconfig_dir)."""
    from infra.ops.promotion.kube import KubectlJobs

    kubeconfig = stacks.outputs(stack).get("kubeconfig")
    if not kubeconfig:
        return KubectlJobs(os.environ.get("KUBECONFIG"))
    path = os.path.join(directory, "kubeconfig.yaml")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as handle:
        handle.write(kubeconfig if isinstance(kubeconfig, str) else json.dumps(kubeconfig))
    return KubectlJobs(path)


def _reporting(action) -> int:
    """A failed Pulumi, S3 or kubectl call is reported on one line (exit 1), not as a traceback."""
    import sys

    from botocore.exceptions import BotoCoreError, ClientError

    from infra.ops.lifecycle.ports import StackOpsError
    from infra.ops.promotion.kube import KubectlError
    from infra.ops.promotion.ports import Conflict

    try:
        return action()
    except (StackOpsError, KubectlError, Conflict, ClientError, BotoCoreError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
