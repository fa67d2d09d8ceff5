"""Writing one facts file of tests/contracts/data/ (shared by the extraction scripts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_facts(folder: str, name: str, facts: dict[str, Any]) -> Path:
    out = Path(folder) / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(facts, indent=1) + "\n", encoding="utf-8")
    print(out)
    return out
