"""No identity policy of the stack lets its holder become more than it is (IAM Service Authorization
Reference; the escalation paths security reviews list, as of 2026-11):

- `NotAction` (or `NotResource`) in an Allow grants every action (or resource) but the ones named, new ones
  included;
- `iam:PassRole` on any role hands any role (an administrator's included) to a service the holder starts;
- `lambda:UpdateFunctionCode`/`UpdateFunctionConfiguration` run code of the holder's choosing with a function's
  role (the stacks deploy code; no role of theirs rewrites a function at run time);
- tagging EC2 or FSx resources (`ec2:CreateTags`, `ec2:DeleteTags`, `fsx:TagResource`, `fsx:UntagResource`)
  with no condition moves any resource into a run guard's scope (its `mlinfra:run-id` conditions), so another
  run's nodes become this run's to terminate; a tagging grant must be limited to resources being created
  (`ec2:CreateAction`), to resources already carrying the run's tag (`aws:ResourceTag/mlinfra:run-id`), or to
  tag keys other than `mlinfra:*` (`aws:TagKeys`);
- a write action on Resource `*` with no condition acts on every resource of its kind in the account."""

from __future__ import annotations

from infra.core.tags import RUN_ID
from policies.model import Resource, ResourceRule
from policies.readers.aws import (
    IAM_POLICY,
    IAM_ROLE,
    IAM_ROLE_POLICY,
    Statement,
    as_list,
    condition_keys,
    covers,
    granted,
    iam_documents,
    statements,
)

NAME = "iam-grants-without-privilege-escalation"
CODE_CHANGES = ("lambda:UpdateFunctionCode", "lambda:UpdateFunctionConfiguration")
TAGGING = ("ec2:CreateTags", "ec2:DeleteTags", "fsx:TagResource", "fsx:UntagResource")
TAG_SAFE_KEYS = frozenset(k.lower() for k in ("ec2:CreateAction", f"aws:ResourceTag/{RUN_ID}", "aws:TagKeys"))
# Resources a tagging grant may name freely: ones no guard acts on (FSx data repository tasks).
_UNGUARDED_TAG_RESOURCES = (":task/",)
# Verbs of actions that change nothing (read, list, look up).
_READ_VERBS = ("get", "list", "describe", "head", "view", "search", "lookup", "batchget", "query", "scan")
# Actions that accept only Resource "*" (Service Authorization Reference: no resource types), allowed on it.
ONLY_ON_ANY = frozenset(
    a.lower()
    for a in (
        "cloudwatch:PutMetricData",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "ecr:GetAuthorizationToken",
        "sts:GetCallerIdentity",
    )
)


def check(resource: Resource) -> list[str]:
    problems = []
    for where, document in iam_documents(resource):
        for st in statements(document):
            if st.effect != "Allow":
                continue
            problems += [f"{where} statement {st.sid} {p}" for p in _statement(st)]
    return problems


def _statement(st: Statement) -> list[str]:
    if "NotAction" in st.raw:
        excluded = ", ".join(str(a) for a in as_list(st.raw.get("NotAction")))
        return [
            f"allows every action but {excluded} (NotAction), new services included; list the actions it needs in "
            "Action"
        ]
    problems, reported = [], set()
    if "NotResource" in st.raw:
        excluded = ", ".join(str(r) for r in as_list(st.raw.get("NotResource")))
        problems.append(
            f"allows {', '.join(st.actions) or 'its actions'} on every resource but {excluded} (NotResource), new "
            "ones included; name the resources in Resource"
        )
    pattern = granted(st, "iam:PassRole")
    if pattern and any(r == "*" or r.endswith(":role/*") for r in st.resources):
        reported.add(pattern)
        problems.append(
            f"allows iam:PassRole{_through(pattern, 'iam:PassRole')} on any role, so its holder can hand an "
            "administrator's role to a service it starts; name the roles it passes"
        )
    code = [a for a in CODE_CHANGES if granted(st, a)]
    if code:
        reported.update(p for p in st.actions if any(covers(p, a) for a in code))
        problems.append(
            f"allows {', '.join(code)}, which runs code of its holder's choosing with the function's role; deploy "
            "function code through the stack instead"
        )
    tagging = [a for a in TAGGING if granted(st, a)]
    if (
        tagging
        and not condition_keys(st) & TAG_SAFE_KEYS
        and not all(any(m in r for m in _UNGUARDED_TAG_RESOURCES) for r in st.resources)
    ):
        reported.update(p for p in st.actions if any(covers(p, a) for a in tagging))
        problems.append(
            f"allows {', '.join(tagging)} with no condition, so its holder can tag any resource into a run guard's "
            f"scope ({RUN_ID}); add a condition on ec2:CreateAction (tags at creation only), "
            f"aws:ResourceTag/{RUN_ID} or aws:TagKeys"
        )
    if "*" in st.resources and not condition_keys(st):
        writes = [a for a in st.actions if a not in reported and a.lower() not in ONLY_ON_ANY and not _reads(a)]
        if writes:
            problems.append(
                f"allows {', '.join(writes)} on Resource '*' with no condition, which reaches every such resource in "
                "the account; name the resources, or add a condition on their tags"
            )
    return problems


def _reads(action: str) -> bool:
    verb = action.split(":", 1)[1].lower() if ":" in action else action.lower()
    return verb != "*" and verb.startswith(_READ_VERBS)


def _through(pattern: str, action: str) -> str:
    return "" if pattern.lower() == action.lower() else f" (through '{pattern}')"


RULE = ResourceRule(
    NAME,
    "Identity policies allow no NotAction, PassRole on any role, function code changes, unconditioned tagging "
    "or writes on '*'.",
    "mandatory",
    (IAM_ROLE, IAM_ROLE_POLICY, IAM_POLICY),
    check,
)
