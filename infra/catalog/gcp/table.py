"""The GCP part of `python -m infra catalog`: machine facts, NIC layout, zones and prices, as text lines."""

from __future__ import annotations

from infra.catalog.gcp import machine_table_source, machine_type, price_table_source


def _usd(value) -> str:
    return "unknown" if value is None else f"{value:.3f}"


def gcp_table(names: list[str]) -> list[str]:
    source, as_of, region = machine_table_source()
    header = (
        "type",
        "accelerators",
        "GPU mem GiB",
        "GPU NICs",
        "Gbps",
        f"zones ({region})",
        "host $/h (no GPU)",
        "$/h per GPU",
        "$/h",
    )
    rows = []
    for name in names:
        m = machine_type(name)
        zones = m.zones_in(region)
        rows.append(
            (
                name,
                f"{m.accelerator.count}x {m.accelerator.model} ({m.accelerator.type})",
                str(m.accelerator.memory_gib),
                f"{m.gpu_nics}" + (f" {m.gpu_networking}" if m.gpu_networking else ""),
                "-" if m.max_bandwidth_gbps is None else str(m.max_bandwidth_gbps),
                "unknown" if zones is None else ",".join(z.rsplit("-", 1)[1] for z in zones),
                _usd(m.host_price_excluding_gpu),
                _usd(m.gpu_price),
                _usd(m.price),
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]
    price_source, price_as_of = price_table_source()
    return lines + [
        "",
        f"gcp: {source} / {as_of}",
        f"gcp prices ({region}, on demand): {price_source} / {price_as_of}; "
        "unknown = no sourced price (never estimated)",
    ]
