"""Extract the facts of one Helm chart version that mlinfra's values must agree with, from the chart's own
source at its release tag, into tests/contracts/data/charts/<chart>-<version>.json.

    python -m tests.contracts.extract_chart --git-dir <clone>/.git --ref <tag> --path <chart folder> \
        --source https://github.com/<owner>/<repo> [--out tests/contracts/data/charts]

What is kept (facts, not the chart): its name, version, appVersion and kubeVersion; every key path of its
values.yaml with the type of its default; the paths its templates pass through whole (`toYaml`, `range`,
`with`), under which any key is accepted; every `.Values` path a template reads; its sub-charts (whose
values are theirs); and the resources its ClusterRoles grant. Run it again when a pinned chart changes.
"""

from __future__ import annotations

import argparse
import datetime
import posixpath
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.contracts.facts_file import write_facts

# `.Values.a.b` passed whole to the manifest: any key under it reaches the object unchanged.
WHOLE = re.compile(
    r"(?:toYaml|range\s+(?:\$\w+\s*,\s*)?\$\w+\s*:=|with|tpl\s*\(?\s*toYaml)\s+\(?\s*\.Values\.([A-Za-z0-9_.-]+)"
)
# Any `.Values.a.b.c` a template reads: a key the chart uses even where values.yaml leaves it out.
READ = re.compile(r"\.Values\.([A-Za-z0-9_][A-Za-z0-9_.-]*[A-Za-z0-9_])")
INDEX_WHOLE = re.compile(r'(?:toYaml|with)\s+\(?\s*index\s+\.Values\s+"([A-Za-z0-9_.-]+)"')
# `with .Values.operator.nodeSelector | default .Values.nodeSelector`: the fallback is passed whole too (KEDA 2.20).
DEFAULT_WHOLE = re.compile(
    r"(?:toYaml|with)\s+\(?\s*\.Values\.[A-Za-z0-9_.-]+\s*\|\s*default\s+\.Values\.([A-Za-z0-9_.-]+)"
)


# `.Values.a.b | toYaml`: piped whole (the Inference Extension's pluginsCustomConfig).
PIPED_WHOLE = re.compile(r"\.Values\.([A-Za-z0-9_.-]+)\s*\|\s*toYaml")
# `$user := .Values.config.x` then `merge $user $base` then `toYaml` of the merge (Envoy Gateway's own config).
MERGED_WHOLE = re.compile(r"\$(\w+)\s*:=\s*\.Values\.([A-Za-z0-9_.-]+)\s*\}\}(?=[\s\S]*?merge\s+\$\1\b)")


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "map"


def key_paths(values: dict[str, Any], prefix: str = "") -> dict[str, str]:
    paths: dict[str, str] = {}
    for key, value in values.items():
        path = f"{prefix}{key}"
        paths[path] = type_name(value)
        if isinstance(value, dict) and value:
            paths.update(key_paths(value, path + "."))
    return paths


def cluster_role_resources(documents: list[str]) -> list[str]:
    resources: set[str] = set()
    for text in documents:
        # Only plain YAML lines carry rules; template directives are dropped before parsing.
        plain = "\n".join(line for line in text.splitlines() if "{{" not in line)
        try:
            for doc in yaml.safe_load_all(plain):
                if isinstance(doc, dict) and doc.get("kind") == "ClusterRole":
                    for rule in doc.get("rules") or []:
                        resources.update(rule.get("resources") or [])
        except yaml.YAMLError:
            continue
    return sorted(resources)


def extract(
    git_dir: str, ref: str, path: str, source: str, published: str | None = None, values_file: str = "values.yaml"
) -> dict[str, Any]:
    """`published`: the version a release stamps into a Chart.yaml that says 0.0.0 in git (Envoy Gateway, AI
    Gateway, the Inference Extension); `values_file`: the file the release renders values.yaml from."""
    chart = yaml.safe_load(git(git_dir, "show", f"{ref}:{path}/Chart.yaml"))
    if published:
        chart["version"] = chart["appVersion"] = published
    values = yaml.safe_load(git(git_dir, "show", f"{ref}:{path}/{values_file}")) or {}
    libraries = _local_libraries(git_dir, ref, path, chart)
    for alias, folder in libraries.items():
        # A library in the same repository renders in the parent's context; its values.yaml is coalesced under
        # its alias, the parent's own values winning.
        own = yaml.safe_load(git(git_dir, "show", f"{ref}:{folder}/values.yaml")) or {}
        values[alias] = _coalesce(values.get(alias) or {}, own)
    templates = [
        name
        for folder in (path, *libraries.values())
        for name in git(git_dir, "ls-tree", "-r", "--name-only", ref, f"{folder}/templates").splitlines()
        if name.endswith((".yaml", ".yml", ".tpl"))
    ]
    texts = [git(git_dir, "show", f"{ref}:{name}") for name in templates]
    whole = sorted(
        {
            m
            for t in texts
            for m in WHOLE.findall(t) + INDEX_WHOLE.findall(t) + DEFAULT_WHOLE.findall(t) + PIPED_WHOLE.findall(t)
        }
        | {path for t in texts for _, path in MERGED_WHOLE.findall(t)}
    )
    return {
        "chart": chart["name"],
        "version": str(chart["version"]),
        "appVersion": str(chart.get("appVersion", "")),
        "kubeVersion": str(chart.get("kubeVersion", "")),
        "source": {
            "repository": source,
            "ref": ref,
            "commit": git(git_dir, "rev-list", "-n", "1", ref).strip(),
            "path": path,
        },
        "extracted": datetime.date.today().isoformat(),
        "subcharts": sorted(
            d["name"] for d in chart.get("dependencies") or [] if d.get("alias", d["name"]) not in libraries
        ),
        **({"libraries": dict(sorted(libraries.items()))} if libraries else {}),
        "keys": dict(sorted(key_paths(values).items())),
        "passedWhole": whole,
        "read": sorted({m for text in texts for m in READ.findall(text)}),
        "clusterRoleResources": cluster_role_resources(texts),
    }


def _local_libraries(git_dir: str, ref: str, path: str, chart: dict[str, Any]) -> dict[str, str]:
    """alias -> repository folder of each library chart the chart takes from its own repository (file://)."""
    found = {}
    for dependency in chart.get("dependencies") or []:
        repository = str(dependency.get("repository", ""))
        if not repository.startswith("file://"):
            continue
        folder = posixpath.normpath(posixpath.join(path, repository[len("file://") :]))
        meta = yaml.safe_load(git(git_dir, "show", f"{ref}:{folder}/Chart.yaml"))
        if meta.get("type") == "library":
            found[dependency.get("alias", dependency["name"])] = folder
    return found


def _coalesce(parent: dict[str, Any], library: dict[str, Any]) -> dict[str, Any]:
    merged = dict(library)
    for key, value in parent.items():
        merged[key] = (
            _coalesce(value, merged[key]) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--path", required=True, help="the chart's folder inside the repository")
    parser.add_argument("--source", required=True, help="the repository's public address")
    parser.add_argument("--out", default=str(Path(__file__).parent / "data" / "charts"))
    parser.add_argument("--published-version", help="the version the release stamps (Chart.yaml says 0.0.0)")
    parser.add_argument("--values-file", default="values.yaml", help="e.g. values.tmpl.yaml, rendered at release")
    args = parser.parse_args(argv)
    facts = extract(
        args.git_dir, args.ref, args.path.rstrip("/"), args.source, args.published_version, args.values_file
    )
    write_facts(args.out, f"{facts['chart']}-{facts['version']}", facts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
