"""Private networks are RFC 1918 only: loopback, link-local (the metadata service's 169.254/16), 0.0.0.0/8
and the other special ranges Python calls private are refused on every cloud, naming the key."""

from __future__ import annotations

import ipaddress

import pytest

from infra.cli import main
from infra.core.network import PUBLIC_SIZE, covers_internet, is_rfc1918, public_addresses


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


def test_the_public_space_is_ipv4_less_the_special_purpose_ranges():
    # 2^32 less IANA's special-purpose blocks no internet host uses, summed by hand.
    special = 3 * 2**24 + 2**22 + 2**16 + 2**20 + 5 * 2**8 + 2**16 + 2**17 + 2**29
    assert PUBLIC_SIZE[4] == 2**32 - special == 3_702_258_432


@pytest.mark.parametrize(
    "cidrs, open_",
    [
        (["0.0.0.0/0"], True),
        (["::/0"], True),
        (["0.0.0.0/1"], True),  # half of it
        (["11.0.0.0/8"], True),  # one public /8: 16.7 million callers
        (["8.0.0.0/9", "8.128.0.0/9"], True),  # the same /8 in pieces
        (["8.0.0.0/9"], False),
        (
            [str(n) for n in ipaddress.IPv4Network("0.0.0.0/0").address_exclude(ipaddress.IPv4Network("10.0.0.0/8"))],
            True,
        ),
        (["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "224.0.0.0/3"], False),  # no public caller
        (["203.0.113.0/24", "198.51.100.0/24", "8.8.8.0/24"], False),
        (["not a cidr", 7, None], False),
    ],
)
def test_the_internet_at_large_is_a_share_of_public_space_however_spelt(cidrs, open_):
    assert covers_internet(cidrs) is open_
    assert public_addresses(["10.0.0.0/8", "8.8.8.0/24"], 4) == 256
