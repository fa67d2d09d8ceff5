"""Every GCP training stack carries its run guard, so Managed Lustre stops billing even when nobody runs the
teardown: a Cloud Run function (cloudfunctionsv2) triggered by a Pub/Sub topic, a Cloud Storage notification that
publishes this run's completion markers (OBJECT_FINALIZE under runs/<run-id>/, and no other run's) to that topic,
and an enabled Cloud Scheduler job that publishes to it at the run's expiry (every minute, or at the expiry's
minute in UTC)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from infra.providers import tokens
from policies.model import Finding, Resource, Stack, StackRule, is_unknown
from policies.readers.gcp import block
from policies.readers.gcp_training import INSTANCE, LUSTRE, RUN_ID_LABEL, label_expiry, labels, stack_is_training

NAME = "gcp-training-stack-has-run-guard"
FUNCTION = tokens.GCP_CLOUDFUNCTIONSV2_FUNCTION
NOTIFICATION = tokens.GCP_STORAGE_NOTIFICATION
JOB = tokens.GCP_CLOUDSCHEDULER_JOB
TOPIC = tokens.GCP_PUBSUB_TOPIC
MESSAGE_PUBLISHED = "google.cloud.pubsub.topic.v1.messagePublished"
UTC_ZONES = (None, "UTC", "Etc/UTC", "Etc/GMT", "GMT")


def _run_id(stack: Stack) -> str | None:
    for resource in stack.of_type(INSTANCE, LUSTRE):
        value = labels(resource).get(RUN_ID_LABEL)
        if isinstance(value, str) and value:
            return value
    return None


def _topics(stack: Stack, resource: Resource, prop: str, value: Any) -> set[str]:
    """What a topic reference stands for: the topic resources it links (the engine's dependencies, as a real
    preview cannot know a new topic's id), else its value."""
    links = resource.property_dependencies.get(prop, ()) if resource.property_dependencies else ()
    linked = {u for u in links if getattr(stack.get(u), "type", None) == TOPIC}
    return linked or ({str(value)} if isinstance(value, str) and value else set())


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    run_id = _run_id(stack)
    if not stack_is_training(stack) or run_id is None:
        return []  # gcp-training-resources-labelled-with-run reports a run without its labels
    guards = [
        f for f in stack.of_type(FUNCTION) if block(f, "eventTrigger").get("eventType") in (MESSAGE_PUBLISHED, None)
    ]
    fix = (
        f"add the run guard ({FUNCTION} triggered by a {TOPIC}, a {NOTIFICATION} publishing OBJECT_FINALIZE of "
        f"runs/{run_id}/ to it, and a {JOB} publishing to it at the run's expiry)"
    )
    if not guards:
        return [Finding("", f"the GCP training stack has no run guard function triggered by Pub/Sub; {fix}")]
    if any(
        is_unknown(block(f, "eventTrigger")) or is_unknown(block(f, "eventTrigger").get("pubsubTopic")) for f in guards
    ):
        return []
    topics: set[str] = set()
    for function in guards:
        topics |= _topics(stack, function, "eventTrigger", block(function, "eventTrigger").get("pubsubTopic"))
    return _notification(stack, run_id, topics) + _tick(stack, topics, label_expiry_of(stack))


def label_expiry_of(stack: Stack) -> str | None:
    return next((e for r in stack.of_type(INSTANCE, LUSTRE) if (e := label_expiry(r))), None)


def _notification(stack: Stack, run_id: str, topics: set[str]) -> list[Finding]:
    wanted = f"runs/{run_id}/"
    findings, complete = [], False
    for notification in stack.of_type(NOTIFICATION):
        prefix, events = notification.get("objectNamePrefix") or "", notification.get("eventTypes") or []
        if any(is_unknown(v) for v in (prefix, events, notification.get("topic"))):
            return []
        if not _topics(stack, notification, "topic", notification.get("topic")) & topics:
            continue
        if events and "OBJECT_FINALIZE" not in events:
            findings.append(
                Finding(
                    notification.urn,
                    f"notification {notification.label} does not send OBJECT_FINALIZE; add it to eventTypes",
                )
            )
        elif not (
            prefix.startswith(wanted) and all(f"{wanted}{m}".startswith(prefix) for m in ("_SUCCESS", "_FAILED"))
        ):
            findings.append(
                Finding(
                    notification.urn,
                    f"notification {notification.label} has objectNamePrefix {prefix!r}, which does not match "
                    f"exactly this run's markers; set it to '{wanted}_' ({wanted}_SUCCESS and _FAILED, no other run)",
                )
            )
        else:
            complete = True
    if complete:
        return []
    return findings or [
        Finding(
            "",
            f"no Cloud Storage notification sends runs/{run_id}/_SUCCESS or _FAILED to the guard's topic; add a "
            f"{NOTIFICATION} with objectNamePrefix 'runs/{run_id}/_', eventTypes OBJECT_FINALIZE, topic the guard's",
        )
    ]


def _fires_at(schedule: str, expiry: datetime | None) -> bool:
    """Every minute, or at the expiry's minute (M H D Mon *)."""
    fields = schedule.split()
    if fields == ["*"] * 5 or fields == ["*/1", "*", "*", "*", "*"]:
        return True
    if expiry is None or len(fields) != 5:
        return False
    return (
        fields == [str(expiry.minute), str(expiry.hour), str(expiry.day), str(expiry.month), "*"] and expiry.second == 0
    )


def _tick(stack: Stack, topics: set[str], expires_at: str | None) -> list[Finding]:
    expiry = datetime.strptime(expires_at, "%Y-%m-%dT%H:%M:%SZ") if expires_at else None
    fix = (
        f"add a {JOB} with schedule '* * * * *' (or the expiry's minute), timeZone 'Etc/UTC' and "
        "pubsubTarget.topicName the guard's topic"
    )
    jobs = [
        j
        for j in stack.of_type(JOB)
        if _topics(stack, j, "pubsubTarget", block(j, "pubsubTarget").get("topicName")) & topics
    ]
    if not jobs:
        return [
            Finding(
                "",
                "no Cloud Scheduler job publishes to the guard's topic, so nothing acts at expires-at; "
                + fix.format(JOB=JOB),
            )
        ]
    findings = []
    for job in jobs:
        schedule, zone = job.get("schedule"), job.get("timeZone")
        if is_unknown(schedule) or is_unknown(zone):
            continue
        if job.get("paused") is True:
            findings.append(Finding(job.urn, f"job {job.label} is paused; unpause it (paused: false)"))
        if zone not in UTC_ZONES:
            findings.append(
                Finding(
                    job.urn,
                    f"job {job.label} reads its schedule in {zone}, but expires-at is UTC; set timeZone 'Etc/UTC'",
                )
            )
        if not _fires_at(str(schedule or ""), expiry):
            findings.append(
                Finding(
                    job.urn,
                    f"job {job.label} has schedule {schedule!r}, which does not fire at the run's expiry "
                    f"{expires_at or '(unknown)'}; set it to '* * * * *' (the guard acts from expires-at on)",
                )
            )
    return findings


RULE = StackRule(
    NAME,
    "GCP training stacks hold a run guard: a function on a topic fed by the run's marker notification and a "
    "scheduler job that fires at expires-at.",
    "mandatory",
    check,
)
