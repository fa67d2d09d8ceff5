"""The registry's promotion rules over an `ObjectStore` (docs/reference.md "Registry"):

- only a run with runs/<run-id>/_SUCCESS and no _FAILED is promoted; its final checkpoint is the
  highest step directory under checkpoints/<run-id>/ (step-N, checkpoint-N, ckpt-N, global_stepN), else
  the run's root when weight files lie there, else the one named with --checkpoint;
- a version is immutable: any object under models/<name>/<version>/ means it exists, and a promotion
  claims it first with models/<name>/<version>/_PROMOTION, written only if absent (If-None-Match), so two
  promotions of one version never both start;
- each artefact gets models/<name>/<version>/<variant>/manifest.json, built from the conversion job's
  report (conversion.json) after checking it against what is stored;
- a failed artefact or version gets a _FAILED marker and is never served or aliased;
- aliases are small objects, models/<name>/aliases/<alias>.json: a version plus the versions before
  it. Nothing is ever deleted; moving an alias writes a new object version, only over the version it
  read (If-Match on its ETag; re-read and retried when another writer came first);
- a version is served only when it has a manifest for the served variant and no _FAILED anywhere.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from infra.core.errors import InputError, Problem
from infra.ops.promotion.ports import Conflict, ObjectStore, StoredObject
from infra.ops.promotion.quality import QUALITY_FILE
from infra.registry import layout as registry_layout

REPORT = "conversion.json"  # written by the conversion job, last
MANIFEST = "manifest.json"
FAILED = "_FAILED"
PROMOTION = "_PROMOTION"  # the claim on a version, written before any Job starts
STEP_DIR = re.compile(r"(?:step|checkpoint|ckpt|global_step)[-_]?(\d+)")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
ALIAS_ATTEMPTS = 5  # conditional alias writes tried before giving up
_IMMUTABLE = "versions are immutable: promote to a new version"


@dataclass(frozen=True)
class Checkpoint:
    prefix: str  # checkpoints/<run-id>/<step>/ (or the run's prefix when it has no steps)
    objects: int
    size: int


def check_run(store: ObjectStore, run_id: str) -> dict[str, Any]:
    """The _SUCCESS marker's JSON; InputError on --run-id for a failed or unfinished run."""
    runs = registry_layout.runs_prefix(run_id)
    failed = store.get(runs + "_FAILED")
    if failed is not None:
        code = _json(failed).get("exit_code")
        detail = f" (exit code {code})" if code is not None else ""
        raise InputError(
            Problem(
                "--run-id",
                f"run {run_id} failed{detail}: {runs}_FAILED is in the registry; "
                "only a run with _SUCCESS can be promoted",
            )
        )
    success = store.get(runs + "_SUCCESS")
    if success is None:
        raise InputError(
            Problem(
                "--run-id",
                f"run {run_id} has no {runs}_SUCCESS in the registry: it is "
                "unfinished or never ran; only a run with _SUCCESS can be promoted",
            )
        )
    return _json(success)


def _step_number(directory: str) -> int:
    """The step of a step directory (`step-1000` -> 1000); -1 for any other name."""
    match = STEP_DIR.fullmatch(directory)
    return int(match.group(1)) if match else -1


def final_checkpoint(store: ObjectStore, run_id: str, explicit: str | None = None) -> Checkpoint:
    """The checkpoint to promote: `explicit` (a prefix under checkpoints/<run-id>/), else the highest-numbered
    step directory (step-1000 after step-900; other directories such as runs/ or final/ never count), else
    the run's root when weight files lie there. InputError when there is none."""
    root = registry_layout.checkpoints_prefix(run_id)
    objects = store.list(root)
    if explicit is not None:
        return _explicit(objects, root, explicit)
    if not objects:
        raise InputError(Problem("--run-id", f"run {run_id} has nothing under {root} to promote"))
    dirs = {o.key[len(root) :].split("/", 1)[0] for o in objects if "/" in o.key[len(root) :]}
    steps = [d for d in dirs if STEP_DIR.fullmatch(d)]
    if steps:
        prefix = root + max(steps, key=lambda d: (_step_number(d), _natural(d))) + "/"
    elif any("/" not in o.key[len(root) :] and o.key.endswith(WEIGHT_SUFFIXES) for o in objects):
        prefix = root
    else:
        raise InputError(
            Problem(
                "--checkpoint",
                (
                    f"{root} has no step directory (step-N, checkpoint-N, ckpt-N, global_stepN) and no weight files "
                    f"({', '.join('*' + s for s in WEIGHT_SUFFIXES)}) at its root; name the checkpoint with "
                    f"--checkpoint "
                    f"{root}<dir>/"
                ),
            )
        )
    return _chosen(objects, prefix)


def _explicit(objects: list[StoredObject], root: str, explicit: str) -> Checkpoint:
    prefix = explicit if explicit.endswith("/") else explicit + "/"
    if not prefix.startswith(root) or registry_layout.prefix_problem(prefix):
        raise InputError(Problem("--checkpoint", f"{explicit!r} is not a prefix under {root} (e.g. {root}step-1000/)"))
    chosen = _chosen(objects, prefix)
    if not chosen.objects:
        raise InputError(Problem("--checkpoint", f"nothing under {prefix} in the registry"))
    return chosen


def _chosen(objects: list[StoredObject], prefix: str) -> Checkpoint:
    chosen = [o for o in objects if o.key.startswith(prefix)]
    return Checkpoint(prefix, len(chosen), sum(o.size for o in chosen))


def check_version_free(store: ObjectStore, model: str, version: str) -> None:
    prefix = registry_layout.model_prefix(model, version)
    existing = store.list(prefix)
    if existing:
        raise InputError(
            Problem(
                "--version",
                f"{prefix} already exists ({len(existing)} objects): the version is "
                f"already being promoted or promoted; {_IMMUTABLE}",
            )
        )


def claim_version(store: ObjectStore, model: str, version: str, claim: dict[str, Any]) -> str:
    """Write models/<name>/<version>/_PROMOTION only if it does not exist; InputError when it does (another
    promotion of the version started first, or the version exists)."""
    key = registry_layout.model_prefix(model, version) + PROMOTION
    try:
        store.put_new(key, _dump(claim))
    except Conflict:
        raise InputError(
            Problem(
                "--version", f"{key} already exists: the version is already being promoted or promoted; {_IMMUTABLE}"
            )
        ) from None
    return key


def servable_problems(store: ObjectStore, model: str, version: str, variants: list[str]) -> list[str]:
    """Why `version` must not be served with `variants`: a _FAILED marker anywhere, or a variant's manifest
    missing (the version failed, or its promotion has not finished)."""
    prefix = registry_layout.model_prefix(model, version)
    keys = {o.key for o in store.list(prefix)}
    problems = [f"{k} is in the registry" for k in sorted(keys) if k.endswith("/" + FAILED)]
    problems += [f"{prefix}{v}/{MANIFEST} is missing" for v in variants if f"{prefix}{v}/{MANIFEST}" not in keys]
    return problems


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
    stored = {
        o.key[len(prefix) :]: o
        for o in store.list(prefix)
        if o.key[len(prefix) :] not in (REPORT, MANIFEST, FAILED, QUALITY_FILE)
    }
    if not all(isinstance(f, dict) and isinstance(f.get("path"), str) for f in files):
        raise ValueError(f"{prefix}{REPORT}: every listed file needs a path")
    listed: dict[str, dict[str, Any]] = {f["path"]: f for f in files}
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
    return {
        **recipe,
        "source": source,
        "compilerVersion": report.get("compilerVersion"),
        "runtimeVersion": report.get("runtimeVersion"),
        "hardware": {**recipe["hardware"], "node": report.get("node")},
        "files": [{"path": p, "size": listed[p]["size"], "sha256": listed[p]["sha256"]} for p in sorted(listed)],
    }


def write_manifest(store: ObjectStore, prefix: str, manifest: dict[str, Any]) -> str:
    store.put(prefix + MANIFEST, _dump(manifest))
    return prefix + MANIFEST


@dataclass(frozen=True)
class Alias:
    model: str
    alias: str
    version: str
    previous: list[str] = field(default_factory=list)  # oldest first; rollback takes the last
    history: list[dict[str, Any]] = field(default_factory=list)


def alias_key(model: str, alias: str) -> str:
    return registry_layout.model_prefix(model, "aliases") + f"{alias}.json"


def read_alias(store: ObjectStore, model: str, alias: str) -> Alias | None:
    raw = store.get(alias_key(model, alias))
    return None if raw is None else _alias(model, alias, raw)


def move_alias(store: ObjectStore, model: str, alias: str, version: str, at: str, **details: Any) -> Alias:
    def moved(current: Alias | None) -> Alias:
        previous = current.previous + [current.version] if current else []
        history = current.history if current else []
        return Alias(
            model,
            alias,
            version,
            previous,
            history
            + [
                {
                    "action": "promote",
                    "version": version,
                    "from": current.version if current else None,
                    "at": at,
                    **details,
                }
            ],
        )

    return update_alias(store, model, alias, moved)[1]


def roll_back_alias(
    store: ObjectStore, model: str, alias: str, at: str, check: Callable[[str], None] | None = None
) -> tuple[Alias, Alias]:
    """(before, after); InputError when the alias does not exist or has no earlier version, or when `check`
    refuses the version it would restore."""

    def restored(current: Alias | None) -> Alias:
        if current is None:
            raise InputError(Problem("--alias", f"{alias_key(model, alias)} does not exist: nothing to roll back"))
        if not current.previous:
            raise InputError(Problem("--alias", f"{model}@{alias} has no earlier version than {current.version}"))
        if check is not None:
            check(current.previous[-1])
        return Alias(
            model,
            alias,
            current.previous[-1],
            current.previous[:-1],
            current.history
            + [{"action": "rollback", "version": current.previous[-1], "from": current.version, "at": at}],
        )

    before, after = update_alias(store, model, alias, restored)
    assert before is not None
    return before, after


def update_alias(
    store: ObjectStore, model: str, alias: str, change: Callable[[Alias | None], Alias]
) -> tuple[Alias | None, Alias]:
    """Read the alias with its ETag, write `change(current)` only over that object version (If-Match; If-None-
    Match when there is none yet); when another writer came first, read again and retry. Conflict after
    ALIAS_ATTEMPTS tries."""
    key = alias_key(model, alias)
    for _ in range(ALIAS_ATTEMPTS):
        found = store.read(key)
        current = _alias(model, alias, found[0]) if found else None
        updated = change(current)
        try:
            if found:
                store.put_if_match(key, _dump(asdict(updated)), found[1])
            else:
                store.put_new(key, _dump(asdict(updated)))
        except Conflict:
            continue
        return current, updated
    raise Conflict(f"{key} changed while it was being moved, {ALIAS_ATTEMPTS} times in a row; it was not moved")


def _alias(model: str, alias: str, raw: bytes) -> Alias:
    data = _json(raw)
    return Alias(
        model, alias, str(data["version"]), [str(v) for v in data.get("previous", [])], list(data.get("history", []))
    )


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
