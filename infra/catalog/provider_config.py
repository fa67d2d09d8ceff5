"""The config keys each provider takes (`aws:region`, `gcp:project`, ...), as its pinned SDK declares them
(data/provider_config_keys.json): a key of a provider's namespace outside them is a typo the provider would
ignore, so `aws:regoin` would leave the region to the environment without a word."""

from __future__ import annotations

import difflib
import functools
import json
from importlib.resources import files
from typing import Any


@functools.cache
def _table() -> dict[str, Any]:
    text = (files("infra.catalog") / "data" / "provider_config_keys.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def providers() -> tuple[str, ...]:
    return tuple(sorted(_table()["providers"]))


def config_keys(provider: str) -> tuple[str, ...]:
    return tuple(_table()["providers"][provider]["keys"])


def sdk(provider: str) -> str:
    return str(_table()["providers"][provider]["sdk"])


def unknown_key_message(provider: str, key: str) -> str | None:
    """Why `<provider>:<key>` is not a config key of that provider (with the nearest one), or None if it is."""
    known = config_keys(provider)
    if key in known:
        return None
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {provider}:{near[0]}?" if near else ""
    return f"not a config key of the {provider} provider ({sdk(provider)} takes {len(known)} keys){hint}"
