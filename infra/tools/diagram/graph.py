"""The picture of stacks as a graph, built from their offline previews (pure): one cluster per stack, one
node per component (type `mlinfra:<module>:<Noun>`) or top-level resource, dependency edges between
components, and the registry bridge edges read from what the stacks declare (infra.tools.diagram.bridge)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal

from infra.providers import tokens
from infra.tools.diagram.bridge import accesses
from infra.tools.offline.engine import Preview
from infra.tools.offline.recording import Registration

# The stacks that must always preview (docs/architecture.md "Stacks"): the default picture.
DEMO_STACKS = ("registry", "training-demo", "serving-demo")
STACK = "pulumi:pulumi:Stack"
NOT_DRAWN = ("pulumi:providers:", "pulumi:pulumi:StackReference")
BUCKET = tokens.AWS_S3_BUCKET


@dataclass(frozen=True)
class Node:
    id: str
    title: str  # the component's noun (or the resource type's name)
    name: str  # the resource name
    detail: str  # e.g. "12 resources"


@dataclass(frozen=True)
class Cluster:
    stack: str
    kind: str
    caption: str  # e.g. "$93.04/h"; may be empty
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: Literal["writes", "reads", "both", "depends", "contains"]  # both: writes src -> dst, reads back
    label: str = ""


@dataclass(frozen=True)
class Graph:
    clusters: tuple[Cluster, ...]
    edges: tuple[Edge, ...]


def build(previews: list[Preview], captions: dict[str, str] | None = None) -> Graph:
    captions = captions or {}
    owners: dict[str, str] = {}  # resource urn -> node id
    clusters, edges = [], set()
    for p in previews:
        nodes, owner, contains = _nodes(p)
        owners.update(owner)
        edges |= contains
        clusters.append(Cluster(p.stack, str(p.config.get("mlinfra:kind", "")), captions.get(p.stack, ""), nodes))
        edges |= _dependencies(p, owner)
    edges |= _bridge(previews, owners)
    return Graph(tuple(clusters), tuple(sorted(edges, key=lambda e: (e.kind, e.src, e.dst, e.label))))


def node_id(stack: str, urn: str) -> str:
    return f"{stack}/{urn.rsplit('::', 2)[-2].rsplit('$', 1)[-1]}/{urn.rsplit('::', 1)[-1]}"


def _drawn(step: Registration) -> bool:
    return step.type != STACK and not step.type.startswith(NOT_DRAWN) and step.op != "read"


def _nodes(p: Preview) -> tuple[tuple[Node, ...], dict[str, str], set[Edge]]:
    by_urn = {s.urn: s for s in p.steps}
    owner: dict[str, str] = {}
    drawn: dict[str, Registration] = {}
    for step in p.steps:
        if not _drawn(step):
            continue
        holder = _holder(step, by_urn)
        if holder is not None:
            drawn[holder.urn] = holder
            owner[step.urn] = node_id(p.stack, holder.urn)
    counts: dict[str, int] = defaultdict(int)
    for step in p.steps:
        if step.custom and step.urn in owner and step.urn not in drawn:
            counts[owner[step.urn]] += 1
    contains = set()
    for holder in drawn.values():
        parent = _holder(by_urn[holder.parent], by_urn) if holder.parent in by_urn and not holder.custom else None
        if parent is not None and parent.urn != holder.urn:
            contains.add(Edge(node_id(p.stack, parent.urn), node_id(p.stack, holder.urn), "contains"))
    nodes = []
    for urn, holder in sorted(drawn.items(), key=lambda item: (item[1].type, item[1].name)):
        nid = node_id(p.stack, urn)
        n = counts.get(nid, 0)
        detail = f"{n} resource{'s' if n != 1 else ''}" if not holder.custom else holder.type.split(":")[0]
        nodes.append(Node(nid, holder.type.rsplit(":", 1)[-1], holder.name, detail))
    return tuple(nodes), owner, contains


def _holder(step: Registration, by_urn: dict[str, Registration]) -> Registration | None:
    """The node a resource is drawn in: its nearest component, or itself at the stack's top level."""
    current: Registration | None = step
    seen = set()
    while current is not None and current.urn not in seen:
        seen.add(current.urn)
        if not current.custom and current.type != STACK:
            return current
        parent = by_urn.get(current.parent)
        if parent is None or parent.type == STACK:
            return current if current.custom else None
        current = parent
    return None


def _dependencies(p: Preview, owner: dict[str, str]) -> set[Edge]:
    edges = set()
    for step in p.steps:
        src = owner.get(step.urn)
        deps = list(step.dependencies) + [u for us in step.property_dependencies.values() for u in us]
        for dep in deps:
            dst = owner.get(dep)
            if src and dst and src != dst:
                edges.add(Edge(dst, src, "depends"))  # drawn from what is used to what uses it
    return _reduce(edges)


def _reduce(edges: set[Edge]) -> set[Edge]:
    """Drop a dependency edge when a longer path already connects the same two components (transitive
    reduction): the picture keeps the order of things without a line for every pair."""
    after: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        after[e.src].add(e.dst)

    def reachable(start: str, skip: tuple[str, str]) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            for nxt in after[node]:
                if (node, nxt) != skip and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    return {e for e in edges if e.dst not in reachable(e.src, (e.src, e.dst))}


def _bridge(previews: list[Preview], owners: dict[str, str]) -> set[Edge]:
    registries: dict[str, str] = {}  # bucket name -> node of the registry component holding it
    for p in previews:
        bucket = p.outputs.get("bucketName")
        holder = next((owners.get(s.urn) for s in p.steps if s.type == BUCKET and s.urn in owners), None)
        if isinstance(bucket, str) and holder:
            registries[bucket] = holder
    roots: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for p in previews:
        for step in p.steps:
            node = owners.get(step.urn)
            if not node:
                continue
            for access in accesses(step.urn, step.type, step.inputs, set(registries)):
                roots[(node, registries[access.bucket], access.mode)].add(access.root)
    edges = set()
    labels: dict[tuple[str, str, Literal["writes", "reads"]], list[str]] = defaultdict(list)
    for (node, registry, mode), found in sorted(roots.items()):
        writes = mode in ("writes", "exports")
        key: tuple[str, str, Literal["writes", "reads"]] = (
            (node, registry, "writes") if writes else (registry, node, "reads")
        )
        labels[key].append(f"{mode} {', '.join(sorted(found))}")
    for (src, dst, kind), parts in labels.items():
        if kind == "reads" and (dst, src, "writes") in labels:
            continue  # drawn once, both ways, with the writes edge
        back = labels.get((dst, src, "reads"), []) if kind == "writes" else []
        edges.add(Edge(src, dst, "both" if back else kind, "\n".join(parts + back)))
    return edges
