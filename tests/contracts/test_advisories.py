"""The model servers mlinfra pins, against the security advisories recorded for their vLLM release
(data/advisories.json): a pinned release inside an advisory's affected range fails here unless the facts
acknowledge exactly that advisory for that image, with the reason no release without it can be pinned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from infra.ops.promotion.recipes import RECIPES
from tests.contracts.test_vllm_contracts import MODELS, vllm_release
from tests.helpers import ROOT

FACTS = json.loads((Path(__file__).parent / "data" / "advisories.json").read_text(encoding="utf-8"))
ADVISORIES = [a for a in FACTS["advisories"] if a["package"] == "vllm"]
ACKNOWLEDGED = FACTS["acknowledged"]


def pinned_images() -> set[str]:
    """Every server image a demo stack names, and every recipe's default (what promote builds in)."""
    return {model.image for _, model in MODELS} | {recipe.default_image for recipe in RECIPES.values()}


def advisories_of(release: str) -> set[str]:
    version = Version(release)
    return {a["ids"][0] for a in ADVISORIES if a["affected"] and version in SpecifierSet(a["affected"])}


@pytest.mark.parametrize("image", sorted(pinned_images()))
def test_no_pinned_server_carries_an_unacknowledged_advisory(image):
    release = vllm_release(image)
    assert release, f"{image}: no known vLLM release"
    found = advisories_of(release)
    acknowledged = set(ACKNOWLEDGED.get(image, {}).get("ids", ()))
    assert not found - acknowledged, f"{image} (vLLM {release}) carries {sorted(found - acknowledged)}"
    # An acknowledgement names no more than the release carries: a bump drops what it fixed.
    assert not acknowledged - found, f"{image}: acknowledged but not carried: {sorted(acknowledged - found)}"


def test_an_acknowledged_image_is_pinned_and_says_why():
    for image, entry in ACKNOWLEDGED.items():
        assert image in pinned_images(), f"{image} is acknowledged but no longer pinned"
        assert len(entry["why"]) > 80 and entry["ids"] == sorted(entry["ids"])


def test_the_check_catches_the_advisory_the_issue_names():
    """CVE-2025-48944 (a malformed tools request crashes the worker): 0.8.5 carried it, 0.33.0 does not."""
    named = next(a for a in ADVISORIES if "CVE-2025-48944" in a["ids"])
    assert named["ids"][0] in advisories_of("0.8.5") and named["ids"][0] not in advisories_of("0.33.0")


def test_every_range_is_a_version_specifier_and_every_unbounded_one_is_in_the_docs():
    docs = (ROOT / "docs" / "serving.md").read_text(encoding="utf-8")
    for advisory in ADVISORIES:
        if advisory["affected"] is None:  # no range and no fixed release in the record read: said in the docs
            assert advisory["ids"][0] in docs, f"{advisory['ids'][0]}: unbounded, not in docs/serving.md"
            continue
        SpecifierSet(advisory["affected"])
        if advisory["patched"]:
            assert Version(advisory["patched"]) not in SpecifierSet(advisory["affected"]), advisory["ids"]
