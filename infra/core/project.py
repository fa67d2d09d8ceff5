"""The Pulumi project on disk: Pulumi.yaml, the stack files in its stackConfigDir, and their config."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import InputError, Problem
from infra.core.paths import set_path

ROOT = Path(__file__).resolve().parents[2]


# Bounds on what a stack file may make the loader build: a stack's config is a few hundred values.
MAX_DEPTH = 32  # nested maps and lists
MAX_ALIASES = 100  # `*anchor` references
MAX_NODES = 100_000  # values once every alias is expanded (a "billion laughs" file exceeds it at once)
_ALLOWED_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "map", "seq")}


class _StrictLoader(yaml.SafeLoader):
    """YAML as Pulumi reads stack files: duplicate keys are errors, dates stay strings, keys are plain values,
    only the JSON-like types (no !!binary, !!timestamp, !!set, ...), and bounded depth, aliases and size."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(None, None, f"more than {MAX_ALIASES} aliases", mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> object:
        _check_node(node, {})
        return super().construct_document(node)


def _check_node(node: yaml.Node, sizes: dict[int, int]) -> int:
    """The node's size with every alias expanded (memoised per node), refusing tags and keys a stack file may
    not hold; stops as soon as the expanded size passes MAX_NODES."""
    if id(node) in sizes:
        return sizes[id(node)]
    if node.tag not in _ALLOWED_TAGS:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not allowed in a stack file "
            "(strings, numbers, booleans, null, lists and maps only)",
            node.start_mark,
        )
    size = 1
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                raise yaml.constructor.ConstructorError(
                    None, None, "a key must be a plain value, not a list or a map", key.start_mark
                )
            size += 1 + _check_node(value, sizes)
    elif isinstance(node, yaml.SequenceNode):
        size += sum(_check_node(item, sizes) for item in node.value)
    sizes[id(node)] = size
    if size > MAX_NODES:
        raise yaml.composer.ComposerError(
            None, None, f"more than {MAX_NODES:,} values once its aliases are expanded", node.start_mark
        )
    return size


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def read_yaml(path: Path, label: str) -> object:
    """Parse a YAML file; any problem is an InputError naming the file, on one line."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(Problem(label, f"cannot be read: {error}")) from None
    except RecursionError:
        raise InputError(Problem(label, f"not valid YAML: nested more than {MAX_DEPTH} levels deep")) from None
    except ValueError as error:  # an integer of more than Python's 4,300 digits, a date out of range
        raise InputError(Problem(label, f"a value no config can hold: {str(error).split(';')[0]}")) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(Problem(label, f"not valid YAML{where}: {problem}")) from None


# A stack's own name as Pulumi allows it (`pulumi stack init`): a file name too, so nothing else reaches a path.
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def stack_reference_problem(reference: str) -> str | None:
    """Why `reference` is not a StackReference name (`<stack>`, `<project>/<stack>` or
    `<organization>/<project>/<stack>`, each part a name of 1-100 letters, digits, '-', '_' or '.'), or None."""
    parts = reference.split("/")
    if len(parts) > 3 or not all(STACK_NAME.fullmatch(part) and part.strip(".") for part in parts):
        return (
            f"{reference[:60]!r} is not a stack reference: <stack>, <project>/<stack> or <organization>/<project>/"
            "<stack>, each part 1-100 letters, digits, '-', '_' or '.' (not dots alone: it is not a path)"
        )
    return None


@dataclass(frozen=True)
class Project:
    root: Path
    name: str
    config_dir: Path

    def stacks(self) -> list[str]:
        return sorted(
            p.name[len("Pulumi.") : -len(".yaml")] for p in self.config_dir.glob("Pulumi.*.yaml") if p.is_file()
        )

    def stack_file(self, stack: str) -> Path:
        if not STACK_NAME.fullmatch(stack or ""):
            raise InputError(
                Problem(
                    "--stack",
                    f"{stack[:60]!r}{'...' if len(stack) > 60 else ''} is not a stack name: 1-100 letters, digits, "
                    "'-', '_' or '.' (Pulumi's rule)",
                )
            )
        path = self.config_dir / f"Pulumi.{stack}.yaml"
        if not path.is_file():
            known = self.stacks()
            close = difflib.get_close_matches(stack, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(Problem("--stack", f"unknown stack '{stack}'{hint}; known stacks: {', '.join(known)}"))
        return path


def load_project(root: Path = ROOT) -> Project:
    meta = read_yaml(root / "Pulumi.yaml", "Pulumi.yaml")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise InputError(Problem("Pulumi.yaml", "must be a map with a project name"))
    return Project(root=root, name=meta["name"], config_dir=root / str(meta.get("stackConfigDir", ".")))


def stack_config(project: Project, stack: str, overrides: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The stack file's `config:` map (structured values as Python objects) with `-c` overrides applied."""
    path = project.stack_file(stack)
    label = str(path.relative_to(project.root))
    document = read_yaml(path, label) or {}
    if not isinstance(document, dict):
        raise InputError(Problem(label, "must be a map with a `config:` section"))
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise InputError(Problem(f"{label}: config", "must be a map of namespaced keys"))
    config = json.loads(json.dumps(config))  # a deep copy we may edit
    for key, value in overrides:
        set_path(config, key, value)
    return config


def stack_is(project: Project, stack: str, kind: str, cloud: str | None = None) -> bool:
    """Whether `stack`'s file declares `kind` (and `cloud`, aws when unset); False for a file that cannot be
    read, which is reported when that stack is asked for by name."""
    try:
        config = stack_config(project, stack)
    except InputError:
        return False
    return config.get("mlinfra:kind") == kind and (cloud is None or config.get("mlinfra:cloud", "aws") == cloud)


def stacks_of_kind(project: Project, kind: str, cloud: str | None = None) -> list[str]:
    """The project's stacks whose files declare `kind` (and `cloud`), in name order."""
    return [name for name in project.stacks() if stack_is(project, name, kind, cloud)]


def engine_config(config: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Config as the engine hands it to a program: strings, JSON for structured values; secret keys."""
    flat: dict[str, str] = {}
    secrets: list[str] = []
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secrets.append(key)
            flat[key] = "offline-secret"  # ciphertext cannot be decrypted without the stack's secrets provider
        elif isinstance(value, (dict, list)):
            flat[key] = json.dumps(value)
        elif isinstance(value, bool):
            flat[key] = "true" if value else "false"
        else:
            flat[key] = str(value)
    return flat, secrets
