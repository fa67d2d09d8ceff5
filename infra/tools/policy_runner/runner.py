"""Run the policy pack over a preview's resources, through the analyzer protocol (as the engine does)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi.runtime.proto.analyzer_pb2 import AnalyzeStackRequest

from infra.core import tags as contract
from infra.core.project import engine_config
from infra.tools.policy_runner import pack_config
from infra.tools.policy_runner.analyzer_client import AnalyzerClient, Diagnostic, PackInfo, answered
from infra.tools.policy_runner.pack_process import PACK_DIR, PackProcess
from infra.tools.preview_json import PolicyResource, PreviewDocument

# The analyzer protocol carries `protect` but no retainOnDelete, so no pack can see it; the runner
# checks it from the preview document itself and reports it like a pack rule.
RETAIN_RULE = "training-resources-not-retained"
# Documents of this many resources are analyzed by two processes of the pack (benchmarks/RESULTS.md).
SHARD_AT = 2_000


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcement: str
    urn: str
    resource_type: str
    message: str
    source: str = "pack"  # "pack" (the CrossGuard pack) | "runner" (a preview-document check)


@dataclass(frozen=True)
class PolicyRun:
    project: str
    stack: str
    pack: PackInfo
    resources: int
    violations: list[Violation]

    @property
    def mandatory(self) -> list[Violation]:
        return [v for v in self.violations if v.enforcement == "mandatory"]


def run(
    document: PreviewDocument,
    user_config: tuple[Mapping[str, Mapping[str, Any]], ...] = (),
    pack_dir: Path = PACK_DIR,
    started: PackProcess | None = None,
) -> PolicyRun:
    """Check `document` with the pack. `started` (from `pack_process.start_early`) is the pack's process when it
    was started for this document's project, stack and config; it is stopped at the end either way. A large
    document is analyzed by a second process of the pack as well (`second_process`)."""
    with second_process(document, pack_dir) as helper, spawned(document, pack_dir, started) as client:
        # While the packs boot (an interpreter, the SDK, the rules), the resources are converted here.
        prepared = helper.stack_request(document.resources, document.providers) if helper is not None else None
        introduce(client)
        info = client.info()
        config = pack_config.resolve(info, *user_config)
        client.configure(config)
        if helper is None:
            return analyze(client, info, document)
        introduce(helper)
        helper.configure(config)
        helper.share_requests(client)
        return analyze(client, info, document, [helper], prepared)


@contextmanager
def second_process(document: PreviewDocument, pack_dir: Path = PACK_DIR) -> Iterator[AnalyzerClient | None]:
    """A second process of the pack, spawned now (it boots beside the first), for a document of SHARD_AT resources
    or more on a machine with more than one core: the Python gRPC server spends most of a large stack's time on
    its own per-call work under one GIL, so a second process takes AnalyzeStack and half the Analyze calls."""
    if len(document.resources) < SHARD_AT or (os.cpu_count() or 1) < 2:
        yield None
        return
    flat, _ = engine_config(document.config)
    helper = AnalyzerClient(pack_dir, document.project, document.stack, flat)
    try:
        helper.spawn()
        yield helper
    finally:
        helper.close()


def start(document: PreviewDocument, pack_dir: Path = PACK_DIR, early: PackProcess | None = None) -> AnalyzerClient:
    """The pack for the document's project, stack and config (the `early` process when it serves them), handshaken
    and told its stack: a context manager, the pack stops on exit. One client serves many documents of the same
    stack and config."""
    return introduce(spawned(document, pack_dir, early))


def spawned(document: PreviewDocument, pack_dir: Path = PACK_DIR, early: PackProcess | None = None) -> AnalyzerClient:
    """A client of the pack's process, started (the `early` one when it serves the document) but not yet dialled."""
    flat, _ = engine_config(document.config)
    client = AnalyzerClient(pack_dir, document.project, document.stack, flat)
    if early is not None and early.serves(pack_dir, document.project, document.stack, flat):
        client.adopt(early)
        return client
    if early is not None:  # started for another stack or config than the document's: not this one's pack
        early.stop()
    client.spawn()
    return client


def introduce(client: AnalyzerClient) -> AnalyzerClient:
    """Dial the spawned pack, handshake and tell it its stack, as the engine does; the pack stops on failure."""
    try:
        client.connect()
        client.handshake()
        client.configure_stack()
    except BaseException:
        client.close()
        raise
    return client


def started(document: PreviewDocument, pack_dir: Path = PACK_DIR) -> AnalyzerClient:
    """The pack, started now (see `start`)."""
    return start(document, pack_dir)


def analyze(
    client: AnalyzerClient,
    info: PackInfo,
    document: PreviewDocument,
    helpers: Sequence[AnalyzerClient] = (),
    prepared: AnalyzeStackRequest | None = None,
) -> PolicyRun:
    """Every resource, then the stack, through a started and configured pack (and `helpers`, further processes of
    it configured alike: the first takes AnalyzeStack, sent before the resources since it needs nothing of theirs,
    and they all share the Analyze calls)."""
    types = {r.urn: r.type for r in document.resources}
    found: list[tuple[str, Diagnostic]] = []
    stack = None
    if helpers:
        if prepared is None:  # else the stack's request, built already while the packs booted
            prepared = helpers[0].stack_request(document.resources, document.providers)
        stack = helpers[0].send_stack(prepared)
    for resource, diagnostics in client.analyze_each(document.resources, document.providers, helpers):
        # As in the engine, a resource policy's diagnostic is about the resource analyzed.
        found.extend((d.urn or resource.urn, d) for d in diagnostics)
    stack_found = answered(stack) if stack is not None else client.analyze_stack(document.resources, document.providers)
    found.extend((d.urn, d) for d in stack_found)
    violations = [Violation(d.policy, d.enforcement, urn, types.get(urn, ""), d.message) for urn, d in found]
    violations.extend(retained_in_training(document.resources))
    order = {p.name: i for i, p in enumerate(info.policies)}
    violations.sort(key=lambda v: (v.urn, order.get(v.policy, len(order)), v.message))
    return PolicyRun(document.project, document.stack, info, len(document.resources), violations)


def retained_in_training(resources: list[PolicyResource]) -> list[Violation]:
    """`retainOnDelete` in a training stack (one whose role tags all say training): the resource would
    outlive the run's teardown and keep billing."""
    if _stack_role(resources) != "training":
        return []
    return [
        Violation(
            RETAIN_RULE,
            "mandatory",
            r.urn,
            r.type,
            f"'{r.name}' is declared with retainOnDelete, so destroying the training stack leaves it "
            "running and billed; drop retain_on_delete",
            source="runner",
        )
        for r in resources
        if r.retain_on_delete
    ]


def _stack_role(resources: list[PolicyResource]) -> str | None:
    roles = set()
    for r in resources:
        tags = r.props.get("tags")
        if isinstance(tags, dict) and isinstance(tags.get(contract.ROLE), str):
            roles.add(tags[contract.ROLE])
    return roles.pop() if len(roles) == 1 else None
