"""The CLI as a user runs it: a subprocess, its exit code, stdout and stderr."""

import json

import jsonschema
import pytest
import yaml

from infra.cli import build_parser
from infra.tools.stack_schema import stack_file_schema
from tests.helpers import ROOT, run_cli


def test_preview_json_is_a_preview_digest():
    done = run_cli("preview", "--stack", "registry", "--json")
    assert done.returncode == 0, done.stderr
    digest = json.loads(done.stdout)
    types = [s["newState"]["type"] for s in digest["steps"]]
    assert types[0] == "pulumi:pulumi:Stack" and "pulumi:providers:aws" not in types  # default providers are internal
    custom = [s for s in digest["steps"] if s["newState"]["custom"]]
    assert all(
        s["provider"].startswith("urn:pulumi:registry::mlinfra::pulumi:providers:aws::default_7_51_1::") for s in custom
    )
    assert digest["changeSummary"] == {"create": len(digest["steps"])}
    bucket = next(s["newState"] for s in digest["steps"] if s["newState"]["type"] == "aws:s3/bucket:Bucket")
    assert bucket["protect"] is True and bucket["retainOnDelete"] is True
    assert [d for d in digest["diagnostics"] if d["severity"] == "error"] == []


def test_preview_all_prints_a_readable_tree():
    done = run_cli("preview", "--all")
    assert done.returncode == 0, done.stderr
    assert "Previewing mlinfra/registry offline" in done.stdout
    assert "mlinfra:registry:ModelRegistry" in done.stdout and "protect, retainOnDelete" in done.stdout
    assert "Resources:" in done.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["-c", "mlinfra:kind=bogus"],
            "error: mlinfra:kind: 'bogus' is not a stack kind; allowed: registry, training, serving",
        ),
        (
            ["-c", "mlinfra:registry.objectLok.enabled=true"],
            "error: mlinfra:registry.objectLok: unknown key (did you mean 'objectLock'?); allowed: bucketName, "
            "bucketNamePrefix, eventBridge, gcpMirror, kmsKeyDeletionWindowDays, lifecycle, objectLock",
        ),
        (
            ["-c", "mlinfra:registry.lifecycle.noncurrentVersionDays=0"],
            "error: mlinfra:registry.lifecycle.noncurrentVersionDays: must be at least 1 (got 0)",
        ),
        (["-c", "oops"], "error: oops: expected -c KEY=VALUE, e.g. -c mlinfra:training.nodeCount=8"),
    ],
)
def test_bad_config_exits_2_with_one_line_naming_the_key(args, message):
    done = run_cli("preview", "--stack", "registry", *args)
    assert done.returncode == 2
    assert done.stderr.strip() == message
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_unknown_stack_exits_2():
    done = run_cli("preview", "--stack", "nope")
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: --stack: unknown stack 'nope'; known stacks: registry")
    assert "Traceback" not in done.stderr


def test_bad_flags_exit_2_with_usage():
    done = run_cli("preview", "--stack")
    assert done.returncode == 2 and "usage:" in done.stderr and "Traceback" not in done.stderr


def test_a_flag_is_never_taken_for_a_longer_one():
    # argparse's prefix matching took `simulate --out x.svg` for `--output-tokens x.svg`
    done = run_cli("simulate", "--stack", "serving-demo", "--out", "x.svg")
    assert done.returncode == 2 and "unrecognized arguments: --out x.svg" in done.stderr
    assert build_parser().parse_args(["preview", "--stack", "registry"]).stack == "registry"


def test_catalog_unknown_type_lists_close_names():
    done = run_cli("catalog", "p5.48xlarg")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "error: types: unknown instance type 'p5.48xlarg'; closest known: p5.48xlarge, p5e.48xlarge, p5.4xlarge"
    )


def test_committed_schema_is_current_and_stack_files_validate_against_it():
    committed = json.loads((ROOT / "stacks" / "mlinfra-stack.schema.json").read_text(encoding="utf-8"))
    assert committed == stack_file_schema(), "run: python -m infra schema --out stacks/mlinfra-stack.schema.json"
    for path in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), committed)


def test_schema_rejects_keys_of_another_kind():
    schema = stack_file_schema()
    bad = {"config": {"mlinfra:kind": "registry", "mlinfra:training": {}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_process_pulumi_config_does_not_leak_into_offline_runs():
    import os
    import subprocess
    import sys

    env = {**os.environ, "PULUMI_CONFIG": '{"mlinfra:foo": "1"}'}
    done = subprocess.run(
        [sys.executable, "-m", "infra", "preview", "--stack", "registry"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
