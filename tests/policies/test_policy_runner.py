"""`python -m infra policy` as a user runs it: exit codes, grouped and JSON output, any preview document."""

import json

import pytest

from infra.core.project import load_project
from policies.pack import RULES
from tests.helpers import run_cli
from tests.policies.policy_fixtures import (
    changed,
    guard_policy,
    registry_resources,
    serving_resources,
    to_document,
    training_resources,
)


def write(tmp_path, document, name="preview.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


def policy(*args):
    return run_cli("policy", *args)


def violations(done):
    return {
        (v["policy"], v["urn"].rsplit("::", 1)[-1])
        for v in json.loads(done.stdout)["violations"]
        if v["enforcement"] == "mandatory"
    }


def serving_pool(types):
    from policies.model import Resource

    return Resource(
        "aws:eks/nodeGroup:NodeGroup",
        {
            "tags": {"mlinfra:role": "serving", "mlinfra:stack": "serving-demo"},
            "instanceTypes": types,
            "clusterName": "c",
            "scalingConfig": {"minSize": 1, "maxSize": 2, "desiredSize": 1},
        },
        urn="urn:pulumi:serving-demo::mlinfra::aws:eks/nodeGroup:NodeGroup::pool",
        name="pool",
    )


def test_compliant_documents_pass(tmp_path):
    for resources, stack in ((training_resources(), "training-demo"), (registry_resources(), "registry")):
        done = policy("--preview-json", write(tmp_path, to_document(resources, stack)))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "0 mandatory, 0 advisory violation(s) - the check passes" in done.stdout


def misconfigured_training():
    broken = training_resources()
    broken = changed(
        broken,
        "template",
        "networkInterfaces",
        broken[[r.name for r in broken].index("template")].props["networkInterfaces"][:2],
    )  # EFA on card 0 only
    broken = changed(broken, "fs", "perUnitStorageThroughput", 300)
    broken = changed(broken, "logs", "", protect=True)
    broken = changed(broken, "template", "metadataOptions.httpTokens", "optional")
    return broken


def misconfigured_serving():
    broken = changed(serving_resources(), "llama-scaler", "spec.maxReplicaCount", delete=True)
    broken = changed(broken, "llama-scaler", "spec.triggers.1", {"type": "cpu", "metadata": {"value": "70"}})
    return changed(broken, "private-a", "mapPublicIpOnLaunch", True)


def misconfigured_guard():
    policy = guard_policy()
    del policy["Statement"][1]["Condition"]
    broken = changed(training_resources(), "guard-policy", "policy", json.dumps(policy))
    return changed(broken, "guard-expiry", "flexibleTimeWindow", {"mode": "FLEXIBLE", "maximumWindowInMinutes": 60})


@pytest.mark.parametrize(
    "build, stack, expected",
    [
        (
            misconfigured_training,
            "training-demo",
            {
                ("efa-on-every-network-card", "template"),
                ("lustre-throughput-allowed-value", "fs"),
                ("training-resources-not-protected", "logs"),
                ("instance-metadata-requires-imdsv2", "template"),
            },
        ),
        (
            lambda: changed(registry_resources(), "registry-public-access-block", "blockPublicPolicy", False),
            "registry",
            {
                ("registry-bucket-public-access-blocked", "registry-public-access-block"),
            },
        ),
        (
            lambda: changed(
                registry_resources(),
                "registry-tls-only",
                "policy",
                json.dumps(
                    {
                        "Statement": [
                            {
                                "Sid": "Everything",
                                "Effect": "Allow",
                                "Principal": {"AWS": "arn:aws:iam::1:root"},
                                "Action": "s3:*",
                                "Resource": "arn:aws:s3:::mlinfra-registry/*",
                            }
                        ]
                    }
                ),
            ),
            "registry",
            {
                ("registry-access-without-wildcards", "registry-tls-only"),
                ("registry-bucket-tls-only", "registry-tls-only"),
            },
        ),
        (lambda: [serving_pool(["p4d.24xlarge"])], "serving-demo", {("serving-pools-use-serving-types", "pool")}),
        (
            misconfigured_serving,
            "serving-demo",
            {
                ("autoscalers-have-replica-bounds", "llama-scaler"),
                ("nodes-without-public-ip", "private-a"),
            },
        ),
        (
            misconfigured_guard,
            "training-demo",
            {
                ("guard-role-scoped-to-run", "guard-policy"),
                # the unscoped terminate is also a write on Resource '*' with no condition
                ("iam-grants-without-privilege-escalation", "guard-policy"),
                ("training-stack-has-run-guard", "guard-expiry"),
            },
        ),
    ],
    ids=["training", "public-registry", "registry-s3-star", "p4d-serving-pool", "serving", "run-guard"],
)
def test_one_misconfiguration_per_family_fails_naming_rule_and_resource(tmp_path, build, stack, expected):
    """The issue's done-when: EFA on one card only, Lustre throughput 300, a protected training resource, IMDSv1
    (one training document), a public registry bucket, `s3:*` on the registry, a p4d serving pool; and the
    serving and run-guard families."""
    done = policy("--preview-json", write(tmp_path, to_document(build(), stack)), "--json")
    assert done.returncode == 1, done.stderr
    assert violations(done) == expected


def test_advisory_violations_are_reported_without_failing(tmp_path):
    broken = changed(
        serving_resources(), "llama-scaler", "spec.triggers.1", {"type": "cpu", "metadata": {"value": "70"}}
    )
    done = policy("--preview-json", write(tmp_path, to_document(broken, "serving-demo")), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    [found] = json.loads(done.stdout)["violations"]
    assert (found["policy"], found["enforcement"], found["urn"].rsplit("::", 1)[-1]) == (
        "model-servers-scale-on-inference-signals",
        "advisory",
        "llama-scaler",
    )
    assert found["message"].startswith(
        "ScaledObject 'llama-scaler' scales model server 'llama-deployment' on cpu (triggers[1])"
    )


def test_human_output_groups_by_resource(tmp_path):
    done = policy("--preview-json", write(tmp_path, to_document(misconfigured_training(), "training-demo")))
    assert done.returncode == 1
    text = done.stdout
    block = text[text.index("  template (aws:ec2/launchTemplate:LaunchTemplate)") :]
    block = block[: block.index("\n\n")]
    assert "[mandatory] efa-on-every-network-card: p4d.24xlarge has EFA on network card 0 only" in block
    assert "[mandatory] instance-metadata-requires-imdsv2: metadataOptions.httpTokens is 'optional'" in block
    assert text.rstrip().endswith("4 mandatory, 0 advisory violation(s) - the check fails")


def test_json_output_fields(tmp_path):
    done = policy("--preview-json", write(tmp_path, to_document(misconfigured_training(), "training-demo")), "--json")
    report = json.loads(done.stdout)
    assert report["policyPack"] == {"name": "mlinfra", "version": "0.1.0", "policies": len(RULES)}
    fs = next(v for v in report["violations"] if v["policy"] == "lustre-throughput-allowed-value")
    assert fs == {
        "policy": "lustre-throughput-allowed-value",
        "enforcement": "mandatory",
        "urn": "urn:pulumi:training-demo::mlinfra::aws:fsx/lustreFileSystem:LustreFileSystem::fs",
        "resourceType": "aws:fsx/lustreFileSystem:LustreFileSystem",
        "message": "perUnitStorageThroughput: 300 is not a PERSISTENT_2 throughput; allowed: 125, 250, 500, "
        "1000 MB/s/TiB",
        "source": "pack",
    }
    assert report["summary"] == {"mandatory": 4, "advisory": 0}


def test_real_cli_documents_with_outputs_and_same_steps(tmp_path):
    document = to_document(changed(training_resources(), "fs", "perUnitStorageThroughput", 300), "training-demo")
    for step in document["steps"]:
        step["op"] = "same"
        step["newState"]["outputs"] = step["newState"].pop("inputs")
        step["newState"].pop("propertyDependencies", None)
    document["steps"].append(
        {
            "op": "delete",
            "urn": "urn:pulumi:training-demo::mlinfra::aws:s3/bucket:Bucket::old",
            "oldState": {"type": "aws:s3/bucket:Bucket"},
        }
    )
    done = policy("--preview-json", write(tmp_path, document), "--json")
    assert done.returncode == 1
    assert violations(done) == {("lustre-throughput-allowed-value", "fs")}


def test_retain_on_delete_in_training_is_caught_outside_the_protocol(tmp_path):
    document = to_document(training_resources(), "training-demo")
    step = next(s for s in document["steps"] if s["urn"].endswith("::fs"))
    step["newState"]["retainOnDelete"] = True
    done = policy("--preview-json", write(tmp_path, document), "--json")
    assert done.returncode == 1
    [found] = json.loads(done.stdout)["violations"]
    assert (found["policy"], found["source"], found["message"]) == (
        "training-resources-not-retained",
        "runner",
        "'fs' is declared with retainOnDelete, so destroying the training stack leaves it running and billed; "
        "drop retain_on_delete",
    )


def test_pack_config_sets_the_cost_ceiling(tmp_path):
    path = write(tmp_path, to_document(training_resources(), "training-demo"))
    done = policy(
        "--preview-json", path, "--policy-config", "stack-hourly-cost-under-ceiling.maxHourlyCostUsd=50", "--json"
    )
    assert done.returncode == 1
    assert violations(done) == {("stack-hourly-cost-under-ceiling", "")}
    config = tmp_path / "pack.json"
    config.write_text(
        json.dumps({"stack-hourly-cost-under-ceiling": {"enforcementLevel": "advisory", "maxHourlyCostUsd": 50}}),
        encoding="utf-8",
    )
    done = policy("--preview-json", path, "--policy-pack-config", str(config))
    assert (
        done.returncode == 0
        and "[advisory] stack-hourly-cost-under-ceiling: the stack may cost $89.22/hour" in done.stdout
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--preview-json", "/nonexistent/preview.json"],
            "error: --preview-json: /nonexistent/preview.json cannot be read (FileNotFoundError); give a file "
            "written by "
            "`pulumi preview --json` or `python -m infra preview --json`",
        ),
        (
            ["--policy-config", "stack-hourly-cost-under-ceiling.maxHourlyCostUsd=cheap"],
            "error: policy config stack-hourly-cost-under-ceiling.maxHourlyCostUsd: must be a number (got 'cheap')",
        ),
        (
            ["--policy-config", "stack-hourly-cost-under-ceilin.maxHourlyCostUsd=5"],
            "error: policy config stack-hourly-cost-under-ceilin: no such policy in pack mlinfra (did you mean "
            "'stack-hourly-cost-under-ceiling'?)",
        ),
        (
            ["--policy-config", "maxHourlyCostUsd"],
            "error: --policy-config maxHourlyCostUsd: expected POLICY.PROPERTY=VALUE, e.g. "
            "stack-hourly-cost-under-ceiling.maxHourlyCostUsd=500",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, message):
    if "--preview-json" not in args:
        args = ["--preview-json", write(tmp_path, to_document(registry_resources(), "registry")), *args]
    done = policy(*args)
    assert done.returncode == 2
    assert done.stderr.strip() == message and done.stdout == "" and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "text", ["not json", "[]", json.dumps({"steps": [{"op": "create", "newState": {"type": "x"}}]})]
)
def test_invalid_documents_exit_2(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    done = policy("--preview-json", str(path))
    assert (
        done.returncode == 2
        and done.stderr.startswith("error: --preview-json: ")
        and len(done.stderr.splitlines()) == 1
    )


DEMO_STACKS = [s for s in ("registry", "training-demo", "serving-demo") if s in load_project().stacks()]


@pytest.mark.parametrize("stack", DEMO_STACKS)
def test_demo_stacks_pass_with_no_mandatory_violation(stack):
    done = policy("--stack", stack, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["summary"]["mandatory"] == 0
