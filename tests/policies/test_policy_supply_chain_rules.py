"""charts-and-images-pinned on hand-made objects: exact chart versions over TLS, images by tag or digest, for every
pod kind and every container list; each compliant form passes and each broken one is named."""

from __future__ import annotations

import pytest

from infra.providers import tokens as t
from policies.rules.everywhere import charts_and_images_pinned
from policies.rules.everywhere.charts_and_images_pinned import image_problem
from tests.policies.policy_fixtures import SERVING, res


def release(**props) -> object:
    return res(t.K8S_HELM_RELEASE, "r", {"chart": "keda", "version": "2.20.2", **props}, SERVING)


def check(resource) -> list[str]:
    return charts_and_images_pinned.RULE.check(resource)


@pytest.mark.parametrize("version", ["2.20.2", "v1.8.3", "1.0.0-rc.1", "0.17.0+build.5"])
def test_an_exact_chart_version_over_tls_passes(version):
    assert check(release(version=version, repositoryOpts={"repo": "https://kedacore.github.io/charts"})) == []
    assert check(release(chart="oci://docker.io/envoyproxy/gateway-helm", version=version)) == []


@pytest.mark.parametrize("version", ["^2.20", "~2", ">=2.0.0", "2.x", "2.20", "*", "latest"])
def test_a_range_is_not_a_version(version):
    assert check(release(version=version)) == [
        f"chart 'keda' version {version!r} is a range, not one version; pin it exactly"
    ]


def test_no_version_and_plain_http_are_named():
    assert check(res(t.K8S_HELM_RELEASE, "r", {"chart": "keda"}, SERVING)) == [
        "chart 'keda' names no version, so each up installs the newest; pin it"
    ]
    assert check(release(repositoryOpts={"repo": "HTTP://charts.example.com"})) == [
        "repositoryOpts.repo 'HTTP://charts.example.com' is fetched over plain HTTP; use its https:// or oci:// address"
    ]
    assert check(release(chart="http://charts.example.com/keda-2.20.2.tgz")) == [
        "chart 'http://charts.example.com/keda-2.20.2.tgz' is fetched over plain HTTP; use its https:// or oci:// "
        "address"
    ]


@pytest.mark.parametrize(
    "image, problem",
    [
        ("vllm/vllm-openai:v0.33.0", None),
        ("registry.example.com:5000/team/app:1.2", None),  # a registry port is not a tag
        ("redis@sha256:" + "a" * 64, None),
        ("redis:latest", "image 'redis:latest' is :latest"),
        ("redis", "image 'redis' has no tag, so it is :latest"),
        (
            "registry.example.com:5000/team/app",
            "image 'registry.example.com:5000/team/app' has no tag, so it is :latest",
        ),
    ],
)
def test_images_by_tag_or_digest(image, problem):
    assert image_problem(image) == problem


def pod(containers: dict) -> dict:
    return {"containers": [{"name": "app", "image": "app:1"}], **containers}


@pytest.mark.parametrize(
    "token, body",
    [
        (t.K8S_DEPLOYMENT, lambda p: {"spec": {"template": {"spec": p}}}),
        (t.K8S_DAEMON_SET, lambda p: {"spec": {"template": {"spec": p}}}),
        (t.K8S_JOB, lambda p: {"spec": {"template": {"spec": p}}}),
        (t.K8S_CRON_JOB, lambda p: {"spec": {"jobTemplate": {"spec": {"template": {"spec": p}}}}}),
        (t.K8S_POD, lambda p: {"spec": p}),
    ],
)
def test_every_pod_kind_and_container_list_is_read(token, body):
    spec = pod({"initContainers": [{"name": "init", "image": "busybox"}]})
    assert check(res(token, "w", body(spec), SERVING)) == [
        "initContainers[0] (init): image 'busybox' has no tag, so it is :latest; pin a tag or a digest"
    ]
    assert check(res(token, "w", body(pod({})), SERVING)) == []
