"""The Pulumi project on disk: Pulumi.yaml, the stack files in its stackConfigDir, and their config."""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from infra.config.paths import set_path
from infra.errors import InputError, Problem

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Project:
    root: Path
    name: str
    config_dir: Path

    def stacks(self) -> list[str]:
        return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in self.config_dir.glob("Pulumi.*.yaml"))

    def stack_file(self, stack: str) -> Path:
        path = self.config_dir / f"Pulumi.{stack}.yaml"
        if not path.is_file():
            known = self.stacks()
            close = difflib.get_close_matches(stack, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise InputError(Problem("--stack", f"unknown stack '{stack}'{hint}; known stacks: {', '.join(known)}"))
        return path


def load_project(root: Path = ROOT) -> Project:
    meta = yaml.safe_load((root / "Pulumi.yaml").read_text())
    return Project(root=root, name=meta["name"], config_dir=root / meta.get("stackConfigDir", "."))


def stack_config(project: Project, stack: str, overrides: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The stack file's `config:` map (structured values as Python objects) with `-c` overrides applied."""
    path = project.stack_file(stack)
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise InputError(Problem(str(path.relative_to(project.root)), f"not valid YAML: {error}")) from None
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise InputError(Problem(f"{path.name}: config", "must be a map of namespaced keys"))
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
