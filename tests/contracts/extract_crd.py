"""Keep one CustomResourceDefinition's schema as test data, from its project's source at a release tag, into
tests/data/crds/<name>.yaml: `description` fields, labels, annotations other than the generator's, printer
columns and Helm template lines dropped; types, formats, bounds, enums, `required` lists, CEL rules and structure
as published (see tests/data/crds/README.md).

    python -m tests.contracts.extract_crd --git-dir <mirror> --ref <tag> --path <file in the repository> \
        --crd <plural.group> --source https://github.com/<owner>/<repo> [--versions v1,v1alpha1]
"""

from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).parent.parent / "data" / "crds"
# `{{- if ... }}`, `{{- end }}`, `{{ include ... }}` lines of CRDs shipped in a chart's templates/.
TEMPLATE_LINE = re.compile(r"^\s*\{\{.*\}\}\s*$")


def stripped(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: stripped(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [stripped(v) for v in node]
    return node


def pruned(schema: dict[str, Any], paths: list[list[str]]) -> dict[str, Any]:
    """`schema` with only the properties along `paths` (each kept whole from its last key): a field set outside
    them fails the tests' closed validation, so the kept file grows with what mlinfra sets."""
    if any(not path for path in paths):
        return schema
    heads: dict[str, list[list[str]]] = {}
    for head, *rest in paths:
        heads.setdefault(head, []).append(rest)
    if "items" in schema and "properties" not in schema:
        return {**schema, "items": pruned(schema["items"], paths)}
    properties = schema.get("properties", {})
    missing = sorted(set(heads) - set(properties))
    if missing:
        raise SystemExit(f"not in the schema: {', '.join(missing)}")
    kept_schema = {k: v for k, v in schema.items() if k not in ("properties", "required", "x-kubernetes-validations")}
    kept_schema["properties"] = {k: pruned(properties[k], rest) for k, rest in heads.items()}
    required = [k for k in schema.get("required", []) if k in heads]
    if required:
        kept_schema["required"] = required
    return kept_schema


def find_crd(text: str, name: str) -> dict[str, Any]:
    text = "\n".join(line for line in text.splitlines() if not TEMPLATE_LINE.match(line))
    for document in yaml.safe_load_all(text):
        if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
            if document["metadata"]["name"] == name:
                return document
    raise SystemExit(f"no CustomResourceDefinition {name} in the file")


def kept(crd: dict[str, Any], versions: set[str] | None, only: list[list[str]] | None = None) -> dict[str, Any]:
    generator = {k: v for k, v in (crd["metadata"].get("annotations") or {}).items() if k.startswith("controller-gen")}
    metadata: dict[str, Any] = {"name": crd["metadata"]["name"]}
    if generator:
        metadata["annotations"] = generator
    spec = dict(crd["spec"])
    spec["versions"] = [
        {k: stripped(v) for k, v in version.items() if k != "additionalPrinterColumns"}
        for version in spec["versions"]
        if versions is None or version["name"] in versions
    ]
    if only:
        for version in spec["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            version["schema"]["openAPIV3Schema"] = pruned(schema, [["apiVersion"], ["kind"], ["metadata"], *only])
    return {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": metadata, "spec": spec}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--crd", required=True, help="the CRD's metadata.name, <plural>.<group>")
    parser.add_argument("--source", required=True, help="the repository's public address")
    parser.add_argument("--versions", help="served versions to keep, comma-separated (default: all)")
    parser.add_argument(
        "--only", help="dotted property paths to keep, comma-separated (e.g. spec.apiKeyAuth,spec.targetRefs)"
    )
    args = parser.parse_args(argv)
    git = ["git", "--git-dir", args.git_dir]
    text = subprocess.run([*git, "show", f"{args.ref}:{args.path}"], check=True, capture_output=True, text=True)
    commit = subprocess.run([*git, "rev-list", "-n", "1", args.ref], check=True, capture_output=True, text=True)
    only = [path.split(".") for path in args.only.split(",")] if args.only else None
    crd = kept(find_crd(text.stdout, args.crd), set(args.versions.split(",")) if args.versions else None, only)
    header = (
        f"# {args.crd}: {args.source}, {args.path} at tag {args.ref} (commit {commit.stdout.strip()}), extracted "
        f"{datetime.date.today().isoformat()} by tests/contracts/extract_crd.py: descriptions, labels, printer\n"
        "# columns and template lines removed"
        + (f"; only {args.only} kept of the spec" if args.only else "")
        + "; every other line of the schema as published. See README.md.\n"
    )
    out = OUT / f"{args.crd}.yaml"
    out.write_text(header + yaml.safe_dump(crd, sort_keys=False), encoding="utf-8")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
