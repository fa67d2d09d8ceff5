"""The public Compute Engine regions (data/gcp_regions.json, with its source and as-of date): a `gcp:region` that
is not one of them is refused before anything is declared."""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib.resources import files


@cache
def _data() -> dict:
    return dict(json.loads((files("infra.catalog") / "data" / "gcp_regions.json").read_text(encoding="utf-8")))


def known_regions() -> tuple[str, ...]:
    return tuple(_data()["regions"])


def regions_source() -> tuple[str, str]:
    data = _data()
    return str(data["source"]), str(data["asOf"])


def region_problem(region: str) -> str | None:
    """Why `region` is not a GCP region, naming the closest known ones; None when it is one."""
    if region in known_regions():
        return None
    close = difflib.get_close_matches(region, known_regions(), n=3, cutoff=0.6)
    hint = f"closest: {', '.join(close)}" if close else f"known: {', '.join(known_regions())}"
    return f"{region} is not a Compute Engine region ({hint}; the catalog's list as of {regions_source()[1]})"
