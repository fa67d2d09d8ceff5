"""Issue 16's bad input on GCP stacks, refused before anything is declared (exit 2, one line naming the key):
regions the catalog does not list, Cloud Storage's reserved bucket words, boot images with spaces or control
characters, sizes that overflow or are not finite, NUL bytes in the job, and the shared job, env and lifetime
checks on GCP training."""

from __future__ import annotations

import json
import re

import pytest

from infra.catalog.gcp import known_machine_types, machine_type
from infra.catalog.gcp.regions import known_regions, region_problem, regions_source
from infra.core.errors import InputError
from infra.core.naming import gcs_bucket_name_problem
from infra.core.providers import GCP_REGION_PATTERN
from infra.kinds import load
from tests.helpers import ROOT, run_cli
from tests.infra.serving.gcp.test_gcp_serving_config import gcp as serving
from tests.infra.training.gcp.test_gcp_training import flat as training

T = "mlinfra:training."
IMAGE_RULE = (
    "must be a Compute Engine image or image family path such as projects/<project>/global/images/family/<family>: "
    "lowercase letters, digits and . _ : / - only, no spaces or control characters"
)


def problems(values: dict) -> list[tuple[str, str]]:
    with pytest.raises(InputError) as error:
        load(values)
    return [(p.path, p.message) for p in error.value.problems]


def mirror(bucket: str) -> dict:
    return {
        "gcp:project": "mlinfra-demo-project",
        "gcp:region": "us-central1",
        "mlinfra:kind": "registry",
        "mlinfra:cloud": "gcp",
        "mlinfra:registry": {
            "mirror": {
                "sourceStack": "registry",
                "bucketName": bucket,
                "readers": ["model-a@mlinfra-demo-project.iam.gserviceaccount.com"],
            }
        },
    }


def test_the_region_table_has_its_source_and_covers_the_machine_catalog():
    source, as_of = regions_source()
    assert source.startswith("https://cloud.google.com/compute/docs/regions-zones") and re.fullmatch(
        r"\d{4}-\d{2}-\d{2}", as_of
    )
    regions = known_regions()
    assert list(regions) == sorted(set(regions)) and len(regions) >= 40
    assert [r for r in regions if not GCP_REGION_PATTERN.fullmatch(r)] == []
    catalogued = {r for name in known_machine_types() for r in machine_type(name).regions}
    assert sorted(catalogued - set(regions)) == []
    data = json.loads((ROOT / "infra" / "catalog" / "data" / "gcp_regions.json").read_text(encoding="utf-8"))
    assert set(data) == {"source", "asOf", "note", "regions"}


@pytest.mark.parametrize(
    "values",
    [
        {**training(zone="us-central9-a"), "gcp:region": "us-central9"},
        {**serving(), "gcp:region": "us-central9"},
    ],
    ids=["training", "serving"],
)
def test_a_region_that_does_not_exist_is_refused(values):
    assert problems(values) == [
        (
            "gcp:region",
            "us-central9 is not a Compute Engine region (closest: us-central1, me-central2, me-central1; the "
            "catalog's list as of 2026-11-27)",
        )
    ]


def test_region_problem_lists_all_when_nothing_is_close():
    assert region_problem("europe-west4") is None
    assert region_problem("zz-qqq1").startswith("zz-qqq1 is not a Compute Engine region (known: africa-south1, ")


@pytest.mark.parametrize(
    "name, expected",
    [
        ("goog-data", "must not begin with 'goog' (Cloud Storage reserves the prefix)"),
        ("googledata", "must not begin with 'goog' (Cloud Storage reserves the prefix)"),
        ("my-google-data", "must not contain 'google' (Cloud Storage refuses 'google' and close misspellings)"),
        ("my-g00gle-data", "must not contain 'g00gle' (Cloud Storage refuses 'google' and close misspellings)"),
        ("data-go0g1e", "must not contain 'go0g1e' (Cloud Storage refuses 'google' and close misspellings)"),
        ("mlinfra-models-bridge-demo", None),
        ("good-go-gle", None),
    ],
)
def test_gcs_reserved_words(name, expected):
    assert gcs_bucket_name_problem(name) == expected


@pytest.mark.parametrize(
    "values, path",
    [
        (training(dataBucket="goog-data"), T + "dataBucket"),
        (serving(modelStore={"bucket": "goog-data"}), "mlinfra:serving.modelStore.bucket"),
        (mirror("goog-data"), "mlinfra:registry.mirror.bucketName"),
    ],
    ids=["training", "serving", "mirror"],
)
def test_every_gcs_bucket_field_refuses_reserved_words(values, path):
    assert problems(values) == [
        (path, "must not begin with 'goog' (Cloud Storage reserves the prefix) (got 'goog-data')")
    ]


@pytest.mark.parametrize(
    "image",
    [
        "projects/p/global/images/a b",
        "projects/p/global/images/a\nb",
        "projects/p/global/images/a\x00b",
        "projects/p/global/images/Family",
        " projects/p/global/images/a",
    ],
)
def test_boot_images_with_spaces_or_control_characters_are_refused(image):
    assert problems(training(image=image)) == [(T + "image", f"{IMAGE_RULE} (got {image!r})")]


@pytest.mark.parametrize(
    "image",
    [
        "projects/p/global/images/family/a3",
        "projects/debian-cloud/global/images/debian-12-bookworm-v20250101",
        "https://www.googleapis.com/compute/v1/projects/p/global/images/family/a3",
        "example.com:p/a3-image",
        "global/images/family/a3",
    ],
)
def test_boot_image_forms_compute_engine_takes_pass(image):
    assert load(training(image=image)).training.image == image


@pytest.mark.parametrize(
    "change, expected",
    [
        (
            {"lustre": {"datasetGib": 2**63}},
            (T + "lustre.datasetGib", "must be at most 1048576.0 (got 9223372036854775808)"),
        ),
        (
            {"lustre": {"datasetGib": float("inf")}},
            (T + "lustre.datasetGib", "Input should be a finite number (got inf)"),
        ),
        (
            {"lifecycle": {"ttlHours": float("nan")}},
            (T + "lifecycle.ttlHours", "Input should be a finite number (got nan)"),
        ),
        (
            {"lifecycle": {"ttlHours": float("inf")}},
            (T + "lifecycle.ttlHours", "Input should be a finite number (got inf)"),
        ),
        (
            {"lifecycle": {"expiresAt": "2099-01-01T00:00:00Z"}},
            (
                T + "lifecycle.expiresAt",
                "2099-01-01T00:00:00Z is {hours} hours away, beyond the maximum lifetime of 336 hours; checkpoint "
                "and start a new run",
            ),
        ),
        ({"job": {"command": ["/a.py", "x\x00y"]}}, (T + "job.command", "command[1] must not contain a NUL byte")),
        ({"job": {"env": {"A": "x\x00y"}}}, (T + "job.env", "env value for 'A' must not contain a NUL byte")),
        (
            {"job": {"env": {"LD_PRELOAD": "/x.so"}}},
            (T + "job.env", "env key 'LD_PRELOAD' is reserved: {reason}"),
        ),
    ],
    ids=["dataset-2^63", "dataset-inf", "ttl-nan", "ttl-inf", "expires-2099", "command-nul", "env-nul", "env-reserved"],
)
def test_gcp_training_refuses_what_aws_training_refuses(change, expected):
    (found,) = problems(training(**change))
    path, message = expected
    assert found[0] == path
    pattern = re.escape(message).replace(r"\{hours\}", r"\d+").replace(r"\{reason\}", ".+")
    assert re.fullmatch(pattern, found[1]), found[1]


def test_bad_gcp_input_exits_2_naming_the_key():
    done = run_cli("preview", "--stack", "training-gcp-demo", "-c", "mlinfra:training.image=projects/p/images/a b")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {T}image: {IMAGE_RULE} (got 'projects/p/images/a b')"]
    done = run_cli("preview", "--stack", "serving-gcp-demo", "-c", "gcp:region=mars-north1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("error: gcp:region: mars-north1 is not a Compute Engine region (closest: ")
