"""Kubernetes resource quantities ("500m", "24Gi", "1.5") as plain numbers (pure)."""

from __future__ import annotations

_SUFFIXES = (
    ("Ki", 1024),
    ("Mi", 1024**2),
    ("Gi", 1024**3),
    ("Ti", 1024**4),
    ("m", 0.001),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
)


def quantity(text: object) -> float:
    """The number a quantity stands for (bytes for memory and storage, cores for CPU); ValueError if it is none."""
    raw = str(text).strip()
    for suffix, factor in _SUFFIXES:
        if raw.endswith(suffix):
            return float(raw[: -len(suffix)]) * factor
    return float(raw)
