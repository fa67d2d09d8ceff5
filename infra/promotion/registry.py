"""The registry's promotion rules over an `ObjectStore` (REFERENCE.md "Registry"):

- only a run with runs/<run-id>/_SUCCESS and no _FAILED is promoted; its final checkpoint is the
  last step under checkpoints/<run-id>/;
- a version is immutable: any object under models/<name>/<version>/ means it exists;
- each artefact gets models/<name>/<version>/<variant>/manifest.json, built from the conversion job's
  report (conversion.json) after checking it against what is stored;
- a failed artefact or version gets a _FAILED marker and is never served or aliased;
- aliases are small objects, models/<name>/aliases/<alias>.json: a version plus the versions before
  it. Nothing is ever deleted; moving an alias writes a new object version.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from infra import registry_layout
from infra.errors import InputError, Problem
from infra.promotion.ports import ObjectStore, StoredObject

REPORT = "conversion.json"    # written by the conversion job, last
MANIFEST = "manifest.json"
FAILED = "_FAILED"


@dataclass(frozen=True)
class Checkpoint:
    prefix: str               # checkpoints/<run-id>/<step>/ (or the run's prefix when it has no steps)
    objects: int
    size: int


def check_run(store: ObjectStore, run_id: str) -> dict[str, Any]:
    """The _SUCCESS marker's JSON; InputError on --run-id for a failed or unfinished run."""
    runs = registry_layout.runs_prefix(run_id)
    failed = store.get(runs + "_FAILED")
    if failed is not None:
        code = _json(failed).get("exit_code")
        detail = f" (exit code {code})" if code is not None else ""
        raise InputError(Problem("--run-id", f"run {run_id} failed{detail}: {runs}_FAILED is in the registry; "
                                             "only a run with _SUCCESS can be promoted"))
    success = store.get(runs + "_SUCCESS")
    if success is None:
        raise InputError(Problem("--run-id", f"run {run_id} has no {runs}_SUCCESS in the registry: it is "
                                             "unfinished or never ran; only a run with _SUCCESS can be promoted"))
    return _json(success)


def final_checkpoint(store: ObjectStore, run_id: str) -> Checkpoint:
    """The last step directory under checkpoints/<run-id>/ (natural order: step-1000 after step-200)."""
    root = registry_layout.checkpoints_prefix(run_id)
    objects = store.list(root)
    if not objects:
        raise InputError(Problem("--run-id", f"run {run_id} has nothing under {root} to promote"))
    steps = {o.key[len(root):].split("/", 1)[0] for o in objects if "/" in o.key[len(root):]}
    prefix = root + max(steps, key=_natural) + "/" if steps else root
    chosen = [o for o in objects if o.key.startswith(prefix)]
    return Checkpoint(prefix, len(chosen), sum(o.size for o in chosen))


def check_version_free(store: ObjectStore, model: str, version: str) -> None:
    prefix = registry_layout.model_prefix(model, version)
    existing = store.list(prefix)
    if existing:
        raise InputError(Problem("--version", f"{prefix} already exists ({len(existing)} objects); versions are "
                                              "immutable: promote to a new version"))


def failed_markers(store: ObjectStore, model: str, version: str) -> list[str]:
    return [o.key for o in store.list(registry_layout.model_prefix(model, version)) if o.key.endswith("/" + FAILED)]


def mark_failed(store: ObjectStore, prefix: str, reason: str, at: str, **details: Any) -> str:
    key = prefix + FAILED
    store.put(key, _dump({"status": "FAILED", "reason": reason, "at": at, **details}))
    return key


def build_manifest(store: ObjectStore, prefix: str, source: dict[str, Any], recipe: dict[str, Any]) -> dict[str, Any]:
    """The artefact's manifest from the job's report, checked against the stored objects; ValueError
    says what does not match (the variant then counts as failed)."""
    raw = store.get(prefix + REPORT)
    if raw is None:
        raise ValueError(f"the job left no {prefix}{REPORT}")
    report = _json(raw)
    files = report.get("files")
    if not isinstance(files, list) or not files:
        raise ValueError(f"{prefix}{REPORT} lists no files")
    stored = {o.key[len(prefix):]: o for o in store.list(prefix) if o.key[len(prefix):] not in (REPORT, MANIFEST, FAILED)}
    listed = {f.get("path"): f for f in files if isinstance(f, dict)}
    for path, entry in listed.items():
        if not isinstance(entry.get("sha256"), str) or not re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]):
            raise ValueError(f"{prefix}{REPORT}: {path} has no sha256")
        if path not in stored:
            raise ValueError(f"{prefix}{path} is in the report but not in the registry")
        if stored[path].size != entry.get("size"):
            raise ValueError(f"{prefix}{path} is {stored[path].size} bytes, the report says {entry.get('size')}")
    extra = sorted(set(stored) - set(listed))
    if extra:
        raise ValueError(f"{prefix}{extra[0]} is in the registry but not in the report")
    return {**recipe, "source": source, "compilerVersion": report.get("compilerVersion"),
            "runtimeVersion": report.get("runtimeVersion"), "hardware": {**recipe["hardware"], "node": report.get("node")},
            "files": [{"path": p, "size": listed[p]["size"], "sha256": listed[p]["sha256"]} for p in sorted(listed)]}


def write_manifest(store: ObjectStore, prefix: str, manifest: dict[str, Any]) -> str:
    store.put(prefix + MANIFEST, _dump(manifest))
    return prefix + MANIFEST


@dataclass(frozen=True)
class Alias:
    model: str
    alias: str
    version: str
    previous: list[str] = field(default_factory=list)   # oldest first; rollback takes the last
    history: list[dict[str, Any]] = field(default_factory=list)


def alias_key(model: str, alias: str) -> str:
    return registry_layout.model_prefix(model, "aliases") + f"{alias}.json"


def read_alias(store: ObjectStore, model: str, alias: str) -> Optional[Alias]:
    raw = store.get(alias_key(model, alias))
    if raw is None:
        return None
    data = _json(raw)
    return Alias(model, alias, str(data["version"]), [str(v) for v in data.get("previous", [])],
                 list(data.get("history", [])))


def move_alias(store: ObjectStore, model: str, alias: str, version: str, at: str, **details: Any) -> Alias:
    current = read_alias(store, model, alias)
    previous = current.previous + [current.version] if current else []
    history = current.history if current else []
    moved = Alias(model, alias, version, previous,
                  history + [{"action": "promote", "version": version, "from": current.version if current else None,
                              "at": at, **details}])
    store.put(alias_key(model, alias), _dump(asdict(moved)))
    return moved


def roll_back_alias(store: ObjectStore, model: str, alias: str, at: str) -> tuple[Alias, Alias]:
    """(before, after); InputError when the alias does not exist or has no earlier version."""
    current = read_alias(store, model, alias)
    if current is None:
        raise InputError(Problem("--alias", f"{alias_key(model, alias)} does not exist: nothing to roll back"))
    if not current.previous:
        raise InputError(Problem("--alias", f"{model}@{alias} has no earlier version than {current.version}"))
    restored = Alias(model, alias, current.previous[-1], current.previous[:-1],
                     current.history + [{"action": "rollback", "version": current.previous[-1],
                                         "from": current.version, "at": at}])
    store.put(alias_key(model, alias), _dump(asdict(restored)))
    return current, restored


def _natural(name: str) -> list[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name)]


def _json(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _dump(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
