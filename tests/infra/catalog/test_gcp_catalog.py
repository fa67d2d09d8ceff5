"""The GCP machine catalog: typed facts from data with source and as-of, unknown prices said so."""

import pytest

from infra.catalog.gcp import (
    UnknownMachineType,
    known_machine_types,
    machine_table_source,
    machine_type,
    on_demand_price,
    price_table_source,
)
from infra.catalog.services import no_charge_reason, service_price

G2 = {
    "g2-standard-4": (4, 1),
    "g2-standard-8": (8, 1),
    "g2-standard-12": (12, 1),
    "g2-standard-16": (16, 1),
    "g2-standard-24": (24, 2),
    "g2-standard-32": (32, 1),
    "g2-standard-48": (48, 4),
    "g2-standard-96": (96, 8),
}

# A2 (serving on A100): vCPUs, GPUs, GPU type and the us-central1 zones offering it.
A2 = {
    "a2-highgpu-1g": (12, 1, "nvidia-tesla-a100", 40),
    "a2-highgpu-2g": (24, 2, "nvidia-tesla-a100", 40),
    "a2-highgpu-4g": (48, 4, "nvidia-tesla-a100", 40),
    "a2-highgpu-8g": (96, 8, "nvidia-tesla-a100", 40),
    "a2-ultragpu-1g": (12, 1, "nvidia-a100-80gb", 80),
    "a2-ultragpu-2g": (24, 2, "nvidia-a100-80gb", 80),
    "a2-ultragpu-4g": (48, 4, "nvidia-a100-80gb", 80),
    "a2-ultragpu-8g": (96, 8, "nvidia-a100-80gb", 80),
}


@pytest.mark.parametrize("name, shape", A2.items())
def test_a2_types_carry_a100s_with_a_whole_vm_price_above_their_host_part(name, shape):
    m = machine_type(name)
    assert (m.vcpus, m.accelerator.count, m.accelerator.type, m.accelerator.memory_gib) == shape
    assert m.accelerator.model == "A100" and m.gpu_price is None  # the per-GPU SKU rows were not retrieved
    assert m.price is not None and m.host_price_excluding_gpu is not None and m.price > m.host_price_excluding_gpu
    zones = m.zones_in("us-central1")
    expected = "ac" if "ultra" in name else "abcf"
    assert zones == tuple(f"us-central1-{z}" for z in expected)


def test_every_requested_type_is_in_the_table_with_source_and_date():
    assert set(known_machine_types()) == set(G2) | set(A2) | {"a3-highgpu-8g", "a3-megagpu-8g"}
    source, as_of, region = machine_table_source()
    assert "skypilot-catalog" in source and "gpu-network-bandwidth" in source
    assert as_of == "2026-01" and region == "us-central1"


@pytest.mark.parametrize("name, shape", G2.items())
def test_g2_types_carry_l4_gpus(name, shape):
    m = machine_type(name)
    assert (m.vcpus, m.accelerator.count) == shape
    assert (m.accelerator.model, m.accelerator.type, m.accelerator.memory_gib) == ("L4", "nvidia-l4", 24)
    assert m.memory_gib == 4 * m.vcpus and m.gpu_nics == 0


def test_a3_nic_layout_one_extra_nic_per_gpu_pair_or_per_gpu():
    high, mega = machine_type("a3-highgpu-8g"), machine_type("a3-megagpu-8g")
    assert (high.accelerator.count, high.accelerator.memory_gib, mega.accelerator.count) == (8, 80, 8)
    assert (high.gpu_nics, high.gpu_networking, high.max_bandwidth_gbps) == (4, "GPUDirect-TCPX", 1000)
    assert (mega.gpu_nics, mega.gpu_networking, mega.max_bandwidth_gbps) == (8, "GPUDirect-TCPXO", 1800)
    assert mega.accelerator.type == "nvidia-h100-mega-80gb" and high.accelerator.type == "nvidia-h100-80gb"


@pytest.mark.parametrize("name", sorted(G2))
def test_g2_whole_vm_price_is_its_host_part_plus_its_l4s(name):
    """Two independent sources (whole-VM hour price; host and GPU SKU rows) must agree."""
    m = machine_type(name)
    assert m.gpu_price == 0.56004
    assert m.price == pytest.approx(m.host_price_excluding_gpu + m.accelerator.count * m.gpu_price, abs=1e-4)
    assert on_demand_price(name) == m.price


def test_a3_prices_per_host_and_per_gpu_with_their_source_and_date():
    high, mega = machine_type("a3-highgpu-8g"), machine_type("a3-megagpu-8g")
    assert (high.price, high.gpu_price, high.host_price_excluding_gpu) == (88.49, 9.79655, 9.46006)
    # The whole-VM price also holds the bundled 6,000 GiB Local SSD: above host + GPUs, by less than a dollar.
    assert 0 < high.price - (high.host_price_excluding_gpu + 8 * high.gpu_price) < 1
    # No source lists a3-megagpu-8g's whole-VM price in us-central1: unknown, though its parts are known.
    assert mega.price is None and on_demand_price("a3-megagpu-8g") is None and mega.gpu_price == 10.34428
    source, as_of = price_table_source()
    assert "Cyclenerd/google-cloud-pricing-cost-calculator" in source and "skypilot-catalog" in source
    assert as_of == "2025-03-06"


def test_zones_known_for_us_central1_unknown_elsewhere():
    m = machine_type("g2-standard-8")
    assert m.zones_in("us-central1") == ("us-central1-a", "us-central1-b", "us-central1-c")
    assert m.zones_in("europe-west4") is None  # not recorded: unknown, not "not offered"


def test_unknown_type_lists_close_names():
    with pytest.raises(UnknownMachineType, match=r"closest known: g2-standard-96, g2-standard-8, g2-standard-4"):
        machine_type("g2-standard-9")


def test_gke_fee_and_free_gcp_types_join_the_service_table():
    assert service_price("gke.cluster").usd == 0.10
    assert (service_price("gcp.cloudNat.vm").usd, service_price("gcp.cloudNat.gateway").usd) == (0.0014, 0.044)
    assert no_charge_reason("gcp:compute/network:Network") == "VPC networks carry no charge"
