"""gcp-training-stack-has-run-guard through the pack's analyzer protocol (`policy --preview-json` on the real
training-gcp-demo preview, then broken copies of it), and each broken field's exact message."""

from __future__ import annotations

import copy
import json

import pytest

from policies.model import Resource, Stack
from policies.rules.training import gcp_training_stack_has_run_guard as rule
from tests.helpers import run_cli

STACK = "training-gcp-demo"
RUN = "demo-llama-7b-gcp-001"
FUNCTION, NOTIFICATION, JOB = rule.FUNCTION, rule.NOTIFICATION, rule.JOB


@pytest.fixture(scope="module")
def document():
    done = run_cli("preview", "--stack", STACK, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def violations(tmp_path, document) -> list[dict]:
    path = tmp_path / "preview.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    done = run_cli("policy", "--preview-json", str(path), "--json")
    found = [v for v in json.loads(done.stdout)["violations"] if v["policy"] == rule.NAME]
    assert (done.returncode == 1) == bool(found), done.stdout + done.stderr
    return found


def broken(document, type_, mutate=None, drop=False):
    copied = copy.deepcopy(document)
    if drop:
        copied["steps"] = [s for s in copied["steps"] if s["newState"]["type"] != type_]
    for step in copied["steps"]:
        if step["newState"]["type"] == type_ and mutate:
            mutate(step["newState"]["inputs"])
    return copied


def test_the_demo_stack_carries_its_guard(tmp_path, document):
    assert violations(tmp_path, document) == []


@pytest.mark.parametrize(
    "type_, mutate, drop, message",
    [
        (
            FUNCTION,
            None,
            True,
            "the GCP training stack has no run guard function triggered by Pub/Sub; add the run guard",
        ),
        (
            NOTIFICATION,
            lambda i: i.update(objectNamePrefix="runs/"),
            False,
            "notification 'run-demo-llama-7b-gcp-001-guard-markers' has objectNamePrefix 'runs/', which does not match "
            f"exactly this run's markers; set it to 'runs/{RUN}/_' (runs/{RUN}/_SUCCESS and _FAILED, no other run)",
        ),
        (
            NOTIFICATION,
            lambda i: i.update(eventTypes=["OBJECT_DELETE"]),
            False,
            "notification 'run-demo-llama-7b-gcp-001-guard-markers' does not send OBJECT_FINALIZE; add it to "
            "eventTypes",
        ),
        (NOTIFICATION, None, True, f"no Cloud Storage notification sends runs/{RUN}/_SUCCESS or _FAILED"),
        (JOB, None, True, "no Cloud Scheduler job publishes to the guard's topic, so nothing acts at expires-at"),
        (JOB, lambda i: i.update(paused=True), False, "job 'run-demo-llama-7b-gcp-001-guard-tick' is paused"),
        (
            JOB,
            lambda i: i.update(timeZone="America/New_York"),
            False,
            "job 'run-demo-llama-7b-gcp-001-guard-tick' reads its schedule in America/New_York, but expires-at is "
            "UTC; set timeZone 'Etc/UTC'",
        ),
        (
            JOB,
            lambda i: i.update(schedule="0 0 1 1 *"),
            False,
            "job 'run-demo-llama-7b-gcp-001-guard-tick' has schedule '0 0 1 1 *', which does not fire at the run's",
        ),
    ],
    ids=["no-function", "prefix-too-wide", "no-finalize", "no-notification", "no-job", "paused", "zone", "schedule"],
)
def test_a_broken_guard_fails_the_check_naming_it(tmp_path, document, type_, mutate, drop, message):
    found = violations(tmp_path, broken(document, type_, mutate, drop))
    assert found and found[0]["enforcement"] == "mandatory" and found[0]["message"].startswith(message), found


def _stack(schedule: str, expiry_label: str = "2026-03-02t10-00-00z") -> Stack:
    labels = {"mlinfra-role": "training", "mlinfra-run-id": "r1", "mlinfra-expires-at": expiry_label}
    topic = "projects/p/topics/t"
    return Stack(
        (
            Resource(rule.INSTANCE, {"labels": labels}, urn="urn:i", name="node"),
            Resource(
                FUNCTION, {"eventTrigger": {"eventType": rule.MESSAGE_PUBLISHED, "pubsubTopic": topic}}, urn="urn:f"
            ),
            Resource(
                NOTIFICATION, {"topic": topic, "objectNamePrefix": "runs/r1/_", "eventTypes": ["OBJECT_FINALIZE"]}
            ),
            Resource(
                JOB,
                {"schedule": schedule, "timeZone": "Etc/UTC", "pubsubTarget": {"topicName": topic}},
                urn="j",
                name="tick",
            ),
        )
    )


@pytest.mark.parametrize(
    "schedule, passes",
    [("* * * * *", True), ("0 10 2 3 *", True), ("1 10 2 3 *", False), ("*/5 * * * *", False), ("0 10 * * *", False)],
)
def test_a_job_must_fire_every_minute_or_at_the_expiry_minute(schedule, passes):
    assert (rule.check(_stack(schedule), {}) == []) is passes


def test_a_job_at_the_minute_of_an_expiry_with_seconds_fires_too_early():
    findings = rule.check(_stack("0 10 2 3 *", "2026-03-02t10-00-30z"), {})
    assert [f.message for f in findings] == [
        "job 'tick' has schedule '0 10 2 3 *', which does not fire at the run's expiry 2026-03-02T10:00:30Z; set it "
        "to '* * * * *' (the guard acts from expires-at on)"
    ]
