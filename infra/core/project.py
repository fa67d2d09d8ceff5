"""The Pulumi project on disk: Pulumi.yaml, the stack files in its stackConfigDir, and their config."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import InputError, Problem
from infra.core.paths import set_path

ROOT = Path(__file__).resolve().parents[2]


class _StrictLoader(yaml.SafeLoader):
    """YAML as Pulumi reads stack files: duplicate keys are errors, and dates stay strings."""


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
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(Problem(label, f"not valid YAML{where}: {problem}")) from None


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
