"""Charts and images are pinned and fetched over TLS: every Helm release names an exact chart version (not a
range, not unset: `helm upgrade` would take whatever is newest) from an https:// or oci:// repository (a chart
over plain http:// can be swapped on the way), and every container of every pod kind names its image by a tag
other than `latest` or by digest. What runs is then what was reviewed, and a rollback returns to it.

Mandatory: an unpinned chart or image changes the cluster without a change to the stack.
"""

from __future__ import annotations

import re

from infra.core.shapes import dict_at
from infra.providers import tokens
from infra.serving.images import pin
from policies.model import Resource, ResourceRule, is_unknown
from policies.readers.workloads import POD_KINDS, every_container

NAME = "charts-and-images-pinned"
# A chart version exactly (SemVer 2, Helm's form, with an optional leading v); ranges (^1.2, ~1, >=1, 1.x) are not.
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")


def image_problem(image: object) -> str | None:
    """Why a container image reference is not pinned, or None (a tag other than latest, or a digest)."""
    if not isinstance(image, str) or is_unknown(image):
        return None  # computed at preview (a mirror's address): its own stack pins it
    tag, digest = pin(image)
    if digest:
        return None
    if tag is None:
        return f"image {image!r} has no tag, so it is :latest"
    if tag == "latest":
        return f"image {image!r} is :latest"
    return None


def _release_problems(resource: Resource) -> list[str]:
    problems = []
    chart, version = resource.get("chart"), resource.get("version")
    repo = dict_at(resource.get("repositoryOpts")).get("repo")
    for where, value in (("chart", chart), ("repositoryOpts.repo", repo)):
        if isinstance(value, str) and value.lower().startswith("http://"):
            problems.append(f"{where} {value!r} is fetched over plain HTTP; use its https:// or oci:// address")
    if is_unknown(version):
        return problems
    if not isinstance(version, str) or not version:
        problems.append(f"chart {chart!r} names no version, so each up installs the newest; pin it")
    elif not EXACT_VERSION.fullmatch(version):
        problems.append(f"chart {chart!r} version {version!r} is a range, not one version; pin it exactly")
    return problems


def check(resource: Resource) -> list[str]:
    if resource.type == tokens.K8S_HELM_RELEASE:
        return _release_problems(resource)
    problems = []
    for where, container in every_container(resource):
        problem = image_problem(container.get("image"))
        if problem:
            problems.append(f"{where} ({container.get('name', '?')}): {problem}; pin a tag or a digest")
    return problems


RULE = ResourceRule(
    NAME,
    "Helm charts by exact version over TLS, container images by tag (not latest) or digest.",
    "mandatory",
    (tokens.K8S_HELM_RELEASE, *POD_KINDS),
    check,
)
