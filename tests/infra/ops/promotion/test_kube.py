"""The kubectl adapter against a recording stand-in `kubectl` (a script: logs its arguments and input,
answers from canned JSON): create (never apply), delete in the background, unschedulable pods."""

from __future__ import annotations

import json
import sys

import pytest

from infra.ops.promotion.kube import KubectlError, KubectlJobs
from infra.ops.promotion.ports import JobState

FAKE = """import json, sys
log, answers = sys.argv[1], json.load(open(sys.argv[2]))
args = sys.argv[3:]
with open(log, "a") as handle:
    handle.write(json.dumps({"args": args, "stdin": sys.stdin.read() if "-" in args else None}) + "\\n")
verb = args[2] if args[:1] == ["--kubeconfig"] else args[0]
key = verb if verb in ("create", "delete") else verb + " " + args[args.index(verb) + 1]
answer = answers.get(key, {})
if answer.get("error"):
    sys.stderr.write(answer["error"] + "\\n")
    sys.exit(1)
sys.stdout.write(json.dumps(answer.get("out", {})))
"""
UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/4 nodes are available: 2 Insufficient memory, 2 node(s) didn't match selector.",
}


@pytest.fixture
def kubectl(tmp_path):
    script, log, answers = tmp_path / "kubectl.py", tmp_path / "log.jsonl", tmp_path / "answers.json"
    script.write_text(FAKE, encoding="utf-8")
    answers.write_text("{}", encoding="utf-8")
    wrapper = tmp_path / "kubectl"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} {script} {log} {answers} "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)

    def calls() -> list[dict]:
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []

    return (
        KubectlJobs("/tmp/kc.yaml", kubectl=str(wrapper)),
        (lambda a: answers.write_text(json.dumps(a), encoding="utf-8")),
        calls,
    )


def test_jobs_are_created_one_by_one_never_applied(kubectl):
    jobs, _, calls = kubectl
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "convert-m-v2-cuda", "namespace": "models"}}
    jobs.create([job])
    [call] = calls()
    assert call["args"] == ["--kubeconfig", "/tmp/kc.yaml", "create", "-f", "-"]
    assert json.loads(call["stdin"]) == job


def test_an_existing_job_is_an_error_not_adopted(kubectl):
    jobs, answer, _ = kubectl
    answer({"create": {"error": 'Error from server (AlreadyExists): jobs.batch "convert-m-v2-cuda" already exists'}})
    with pytest.raises(KubectlError, match=r"kubectl create failed: .*AlreadyExists"):
        jobs.create([{"kind": "Job", "metadata": {"name": "convert-m-v2-cuda"}}])


def test_delete_removes_the_job_and_its_pods_in_the_background(kubectl):
    jobs, _, calls = kubectl
    jobs.delete("models", "convert-m-v2-cuda")
    assert calls()[0]["args"][2:] == [
        "delete",
        "job",
        "convert-m-v2-cuda",
        "-n",
        "models",
        "--cascade=background",
        "--ignore-not-found",
    ]


def test_an_unschedulable_pod_is_reported_with_the_autoscalers_reason(kubectl):
    jobs, answer, calls = kubectl
    answer(
        {
            "get job": {"out": {"status": {"active": 1}}},
            "get pods": {
                "out": {
                    "items": [{"metadata": {"name": "convert-m-v2-cuda-x1"}, "status": {"conditions": [UNSCHEDULABLE]}}]
                }
            },
            "get events": {
                "out": {
                    "items": [
                        {"lastTimestamp": "2026-03-01T10:00:00Z", "message": "pod didn't trigger scale-up: old"},
                        {
                            "lastTimestamp": "2026-03-01T10:05:00Z",
                            "message": "pod didn't trigger scale-up: 1 max node group size reached",
                        },
                    ]
                }
            },
        }
    )
    state = jobs.state("models", "convert-m-v2-cuda")
    assert state == JobState(
        "pending",
        "",
        UNSCHEDULABLE["message"] + "; cluster autoscaler: pod didn't trigger scale-up: 1 max node group size reached",
    )
    assert [c["args"][2:4] for c in calls()] == [["get", "job"], ["get", "pods"], ["get", "events"]]
    assert "batch.kubernetes.io/job-name=convert-m-v2-cuda" in calls()[1]["args"]
    assert "involvedObject.name=convert-m-v2-cuda-x1,reason=NotTriggerScaleUp" in calls()[2]["args"]


def test_a_scheduled_pod_is_running_and_a_finished_job_asks_nothing_more(kubectl):
    jobs, answer, calls = kubectl
    answer(
        {
            "get job": {"out": {"status": {"active": 1}}},
            "get pods": {
                "out": {
                    "items": [
                        {
                            "metadata": {"name": "p"},
                            "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]},
                        }
                    ]
                }
            },
        }
    )
    assert jobs.state("models", "j") == JobState("running")
    answer({"get job": {"out": {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}}})
    assert jobs.state("models", "j") == JobState("succeeded")
    assert [c["args"][2:4] for c in calls()][-1] == ["get", "job"]
