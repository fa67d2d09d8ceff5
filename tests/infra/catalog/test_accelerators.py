"""Accelerator facts for serving: one device per serving type of both clouds, formats with their sizes, which
device supports which precision, and the check that keeps the curated table in step with the instance catalogs."""

from __future__ import annotations

import copy

import pytest

from infra.catalog.accelerators import (
    UnknownAcceleratorFact,
    device,
    device_of,
    format_bytes,
    precision,
    serving_offer,
    serving_offers,
)
from infra.catalog.accelerators_check import load, main, problems
from infra.catalog.roles import types_for

FAMILIES = {
    ("aws", "g4dn.xlarge"): "T4",
    ("aws", "g5.xlarge"): "A10G",
    ("aws", "g6.xlarge"): "L4",
    ("aws", "g6e.xlarge"): "L40S",
    ("aws", "inf2.xlarge"): "Inferentia2",
    ("gcp", "g2-standard-8"): "L4",
    ("gcp", "a2-highgpu-1g"): "A100-40GB",
    ("gcp", "a2-ultragpu-1g"): "A100-80GB",
}


@pytest.mark.parametrize(("where", "name"), FAMILIES.items())
def test_each_family_maps_to_its_device(where, name):
    assert device_of(*where).name == name


def test_every_serving_type_of_both_clouds_has_device_facts_and_a_price():
    offers = serving_offers()
    assert {o.instance_type for o in offers if o.cloud == "aws"} == set(types_for("serving"))
    assert {o.instance_type for o in offers if o.cloud == "gcp"} >= {"g2-standard-8", "a2-highgpu-8g", "a2-ultragpu-8g"}
    assert all(o.price_per_hour and o.devices >= 1 for o in offers)
    assert not any(o.instance_type.startswith("a3") for o in offers)  # H100: a training type, no serving facts


def test_device_figures_are_the_datasheets():
    t4, a10g, l4, l40s, inf2 = (device(n) for n in ("T4", "A10G", "L4", "L40S", "Inferentia2"))
    assert (t4.memory_bandwidth_gbps, t4.dense_tflops["fp16"], t4.dense_tflops["bf16"]) == (320, 65, None)
    assert (a10g.memory_mib, a10g.memory_bandwidth_gbps, a10g.dense_tflops["bf16"]) == (22888, 600, 70)
    assert (l4.memory_bandwidth_gbps, l4.dense_tflops["fp8"]) == (300, 242.5)
    assert (l40s.memory_mib, l40s.memory_bandwidth_gbps, l40s.dense_tflops["bf16"]) == (45776, 864, 362.05)
    assert (inf2.memory_gib, inf2.memory_bandwidth_gbps, inf2.peak_flops("bf16")) == (32, 820, 190e12)
    assert device("A100-80GB").memory_bandwidth_gbps == 2039 and device("A100-40GB").memory_mib == 40960
    assert all(d.source and d.as_of for d in (t4, a10g, l4, l40s, inf2))


def test_a_multi_device_type_counts_its_devices():
    offer = serving_offer("aws", "g5.12xlarge")
    assert (offer.devices, offer.vcpus, offer.price_per_hour) == (4, 48, 5.672)
    assert serving_offer("gcp", "a2-ultragpu-8g").devices == 8


SIZES = [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5)]


@pytest.mark.parametrize(("fmt", "size"), SIZES)
def test_bytes_per_element(fmt, size):
    assert format_bytes(fmt) == size


def test_fp8_is_refused_on_t4_and_a10g_naming_the_hardware():
    fp8 = precision("fp8")
    assert device("T4").unsupported(fp8) == "T4 (Turing) has no fp8 compute; it computes in fp32, fp16, int8"
    assert device("A10G").unsupported(fp8) == "A10G (Ampere) has no fp8 compute; it computes in fp32, bf16, fp16, int8"
    assert device("A100-80GB").unsupported(fp8) is not None
    assert all(device(n).unsupported(fp8) is None for n in ("L4", "L40S", "Inferentia2"))


def test_t4_has_no_bf16_and_serves_fp16_and_int4():
    why = device("T4").unsupported(precision("bf16"))
    assert why == "T4 (Turing) has no bf16 compute; it computes in fp32, fp16, int8"
    assert device("T4").unsupported(precision("fp16")) is None
    assert device("T4").unsupported(precision("int4")) is None


def test_kv_cache_format_is_checked_apart():
    fp8_kv = precision("bf16").with_kv_cache("fp8")
    assert (fp8_kv.name, fp8_kv.weights, fp8_kv.kv_cache) == ("bf16+kv-fp8", "bf16", "fp8")
    assert device("L4").unsupported(fp8_kv) is None
    assert device("A10G").unsupported(fp8_kv) == (
        "A10G (Ampere) cannot keep the KV cache in fp8; its KV-cache formats: bf16, fp16"
    )


def test_unknown_names_list_the_close_ones():
    with pytest.raises(UnknownAcceleratorFact, match=r"unknown precision 'bf61'; closest known: bf16"):
        precision("bf61")
    with pytest.raises(UnknownAcceleratorFact, match=r"unknown number format 'fp4'"):
        format_bytes("fp4")
    with pytest.raises(UnknownAcceleratorFact, match=r"unknown aws serving type 'g5.xlarg'; closest known: g5.xlarge"):
        serving_offer("aws", "g5.xlarg")


def test_the_committed_table_passes_its_check(capsys):
    assert main([]) == 0
    assert "serving types of both clouds checked" in capsys.readouterr().out


def test_the_check_finds_each_kind_of_problem():
    raw = copy.deepcopy(load())
    raw["devices"]["A10G"]["memoryMiB"] = 24576
    raw["devices"]["T4"]["computeFormats"].append("bf16")
    raw["devices"]["L4"]["source"] = ""
    raw["precisions"]["int4"]["weights"] = "int3"
    del raw["devices"]["L40S"]
    found = problems(raw)
    assert "device A10G: memoryMiB 24576, but DescribeInstanceTypes reports 22888 for g5.xlarge" in found
    assert "device T4: compute format bf16 has no denseTflops" in found
    assert "device T4: denseTflops.bf16 is null but bf16 is listed as a compute format" in found
    assert "device L4: no source or asOf" in found
    assert "precision int4: weights format 'int3' is not in formats" in found
    assert "serving type g6e.xlarge: no device facts for its L40S accelerator" in found
