"""Private networks are RFC 1918 only: loopback, link-local (the metadata service's 169.254/16), 0.0.0.0/8
and the other special ranges Python calls private are refused on every cloud, naming the key."""

from __future__ import annotations

import ipaddress

import pytest

from infra.cli import main
from infra.core.network import is_rfc1918


@pytest.mark.parametrize("cidr", ["10.0.0.0/8", "10.64.0.0/16", "172.16.0.0/12", "172.31.240.0/20", "192.168.0.0/16"])
def test_rfc1918_ranges_are_private(cidr):
    assert is_rfc1918(ipaddress.IPv4Network(cidr))


@pytest.mark.parametrize(
    "cidr", ["127.0.0.0/16", "169.254.0.0/16", "0.0.0.0/16", "100.64.0.0/16", "192.0.0.0/24", "172.32.0.0/16"]
)
def test_special_and_public_ranges_are_not(cidr):
    assert not is_rfc1918(ipaddress.IPv4Network(cidr))


@pytest.mark.parametrize(
    ("stack", "key", "cidr"),
    [
        ("training-demo", "mlinfra:training.network.cidr", "169.254.0.0/16"),
        ("serving-demo", "mlinfra:serving.cluster.vpcCidr", "127.0.0.0/16"),
        ("serving-gcp-demo", "mlinfra:serving.cluster.network.nodesCidr", "169.254.0.0/20"),
        ("training-gcp-demo", "mlinfra:training.network.cidr", "127.0.0.0/20"),
    ],
)
def test_each_cloud_refuses_a_special_range_naming_the_key(stack, key, cidr, capsys):
    assert main(["preview", "--stack", stack, "-c", f"{key}={cidr}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {key}: ") and "RFC 1918" in err
