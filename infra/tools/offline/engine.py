"""The offline preview: run the real program for a stack under Pulumi's mock runtime and record it.

Each run happens on its own thread, whose fresh context gives it its own Pulumi settings, config and
root stack; that is also how a StackReference is resolved: the referenced stack is previewed on
another thread and its outputs handed back.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import runpy
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from infra.core.errors import InputError, Problem
from infra.core.project import Project, engine_config, load_project, stack_config
from infra.kinds import load
from infra.providers import schema
from infra.tools.offline.recording import Diagnostic, OfflineMocks, RecordingMonitor, Registration

PROVIDER_ID = "00000000-0000-0000-0000-000000000000"


@dataclass
class Preview:
    project: str
    stack: str
    steps: list[Registration]
    diagnostics: list[Diagnostic]
    outputs: dict[str, Any]
    config: dict[str, Any]
    duration_s: float
    providers: dict[str, str] = field(default_factory=dict)  # package -> default provider urn
    referenced: dict[str, Preview] = field(default_factory=dict)  # stack name -> its preview (StackReferences)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def resources(self) -> list[Registration]:
        return [s for s in self.steps if s.type != "pulumi:pulumi:Stack"]


def preview(
    stack: str,
    overrides: Iterable[tuple[str, str]] = (),
    project: Project | None = None,
    _chain: tuple[str, ...] = (),
) -> Preview:
    """Preview `stack` offline. Bad config or an unknown stack raises InputError before anything runs."""
    project = project or load_project()
    config = stack_config(project, stack, overrides)
    load(config)
    if stack in _chain:
        raise InputError(
            Problem("mlinfra:registryStack", f"stack references form a cycle: {' -> '.join(_chain + (stack,))}")
        )
    return _on_own_thread(lambda: _run(project, stack, config, _chain + (stack,)), stack)


def run_program(
    program: Callable[[], object],
    stack: str = "test",
    config: dict[str, Any] | None = None,
    project: Project | None = None,
) -> Preview:
    """Run `program` (any function declaring resources) the way `preview` runs a stack: for component tests."""
    project = project or load_project()
    return _on_own_thread(lambda: _run(project, stack, dict(config or {}), (stack,), program), stack)


def _on_own_thread(fn: Callable[[], Preview], stack: str) -> Preview:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["preview"] = fn()
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, name=f"offline-preview-{stack}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["preview"]


def _key_holding(config: dict[str, Any], value: str) -> str | None:
    """The config key path whose value is `value` (the key a StackReference's name came from), if one is."""

    def walk(node: Any, path: str) -> str | None:
        if node == value:
            return path
        if isinstance(node, dict):
            for key, child in node.items():
                found = walk(child, f"{path}.{key}" if path else str(key))
                if found:
                    return found
        return None

    return walk(config, "")


def _run(
    project: Project,
    stack: str,
    config: dict[str, Any],
    chain: tuple[str, ...],
    program: Callable[[], object] | None = None,
) -> Preview:
    started = time.perf_counter()
    flat, secret_keys = engine_config(config)
    referenced: dict[str, Preview] = {}

    unresolved: list[str] = []

    def resolve_stack(target: str) -> dict[str, Any]:
        name = target.rsplit("/", 1)[-1]
        if name not in project.stacks():
            unresolved.append(target)  # bad input: reported once the run ends, not as the program's KeyError
            return {}
        referenced[name] = preview(name, project=project, _chain=chain)
        return referenced[name].outputs

    _ensure_event_loop()  # this thread's own loop, as the Python language host has one
    # The runtime's pending-output set and its lock default to one process-wide object; a run that
    # previews a referenced stack would otherwise wait on its caller's outputs and deadlock.
    pulumi_settings.SETTINGS.outputs = set()
    pulumi_settings.SETTINGS.lock = threading.Lock()
    mocks_ = OfflineMocks(flat, resolve_stack)
    monitor = RecordingMonitor(mocks_)
    pulumi.runtime.set_all_config(flat, secret_keys)
    pulumi.runtime.set_mocks(
        mocks_,
        project=project.name,
        stack=stack,
        preview=True,
        monitor=monitor,
        logger=_diagnostic_logger(stack, mocks_.diagnostics),
    )
    for key in secret_keys:
        mocks_.diagnostics.append(Diagnostic("info", f"{key} is a secret; the offline preview uses a placeholder"))
    if str(project.root) not in sys.path:  # as the language host runs it: the program's directory importable
        sys.path.insert(0, str(project.root))
    main = str(project.root / "__main__.py")
    declare = program or (lambda: runpy.run_path(main, run_name="__main__"))
    # The runtime calls the monitor through the loop's default executor, and every worker thread gets
    # an event loop of its own; a pool per run, shut down at its end with its loops closed, frees them
    # (and their sockets) instead of keeping them for the life of the process.
    with _worker_loops_closed_at_the_end():
        executor = ThreadPoolExecutor(thread_name_prefix=f"offline-{stack}")
        asyncio.get_event_loop().set_default_executor(executor)
        try:
            _sync_await(run_pulumi_func(lambda: None if declare() is None else None))
            outputs = _stack_outputs(mocks_.diagnostics)
        except pulumi.RunError as error:
            mocks_.diagnostics.append(Diagnostic("error", str(error)))
            outputs = {}
        except Exception as error:
            mocks_.diagnostics.append(Diagnostic("error", f"program failed: {_describe(error)}"))
            outputs = {}
        finally:
            executor.shutdown(wait=True)

    if unresolved:
        raise InputError(
            [
                Problem(
                    _key_holding(config, target) or f"StackReference {target}",
                    f"no stack '{target.rsplit('/', 1)[-1]}' in {project.config_dir.name}/ for the StackReference "
                    f"{target!r}: the offline preview runs the referenced stack's own file, so it must be a stack of "
                    "this project",
                )
                for target in dict.fromkeys(unresolved)
            ]
        )
    for referenced_preview in referenced.values():
        for diagnostic in referenced_preview.errors:
            mocks_.diagnostics.append(
                Diagnostic("error", f"referenced stack {referenced_preview.stack}: {diagnostic.message}")
            )
    _check_schema(monitor.registrations, mocks_.diagnostics)
    return Preview(
        project=project.name,
        stack=stack,
        # Registration order depends on thread scheduling; URN order keeps output stable run to run.
        steps=sorted(monitor.registrations, key=lambda r: (r.type != "pulumi:pulumi:Stack", r.urn)),
        diagnostics=mocks_.diagnostics,
        outputs=outputs,
        config=config,
        duration_s=time.perf_counter() - started,
        providers=_default_providers(project.name, stack, monitor.registrations),
        referenced=referenced,
    )


class _LoopRecorder(asyncio.DefaultEventLoopPolicy):
    """Event loop policy that remembers the loops the runtime creates in worker threads."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        with self._lock:
            self.loops.append(loop)
        return loop


@contextmanager
def _worker_loops_closed_at_the_end() -> Iterator[None]:
    """Close the loops (and their self-pipe sockets) the runtime makes in worker threads once the
    outermost run is over; a referenced stack's run inside a run leaves that to the outer one."""
    previous = asyncio.get_event_loop_policy()
    if isinstance(previous, _LoopRecorder):
        yield
        return
    recorder = _LoopRecorder()
    recorder.set_event_loop(previous.get_event_loop())  # this thread keeps its loop
    asyncio.set_event_loop_policy(recorder)
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(previous)
        for loop in recorder.loops:
            loop.close()


def _stack_outputs(diagnostics: list[Diagnostic]) -> dict[str, Any]:
    root = pulumi.runtime.get_root_resource()
    outputs = {}
    for name, value in (getattr(root, "outputs", {}) or {}).items():
        try:
            outputs[name] = _sync_await(pulumi.Output.from_input(value).future())
        except Exception as error:
            diagnostics.append(Diagnostic("error", f"stack output {name!r} failed: {_describe(error)}"))
    return outputs


def _check_schema(registrations: list[Registration], diagnostics: list[Diagnostic]) -> None:
    custom_kinds: set[str] = set()
    for reg in registrations:
        if reg.custom and reg.op == "create" and schema.is_known_package(reg.type):
            if schema.resource_input_class(reg.type) is None:
                if schema.is_custom_resource(reg.type):
                    custom_kinds.add(reg.type)
                    continue
                diagnostics.append(
                    Diagnostic("error", f"{reg.type}: not a resource type of the installed provider", reg.urn)
                )
                continue
            for unknown in schema.unknown_properties(reg.type, reg.inputs):
                diagnostics.append(Diagnostic("error", f"{reg.type} '{reg.name}': {unknown.message()}", reg.urn))
    for kind in sorted(custom_kinds):
        diagnostics.append(
            Diagnostic(
                "info",
                f"{kind}: a Kubernetes custom resource; its properties are not "
                "checked offline (the provider has no schema for CRDs)",
            )
        )


def _default_providers(project: str, stack: str, registrations: list[Registration]) -> dict[str, str]:
    providers = {}
    for reg in registrations:
        package = reg.type.split(":")[0]
        if reg.custom and schema.is_known_package(reg.type) and package not in providers:
            version = importlib.metadata.version(f"pulumi_{package}").replace(".", "_")
            providers[package] = f"urn:pulumi:{stack}::{project}::pulumi:providers:{package}::default_{version}"
    return providers


def _describe(error: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "site-packages" not in (f.filename or "")]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


def _diagnostic_logger(stack: str, diagnostics: list[Diagnostic]) -> logging.Logger:
    class _ToDiagnostics(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            severity = {logging.ERROR: "error", logging.WARNING: "warning"}.get(record.levelno, "info")
            diagnostics.append(Diagnostic(severity, record.getMessage()))

    logger = logging.Logger(f"mlinfra.offline.{stack}", level=logging.INFO)
    logger.addHandler(_ToDiagnostics())
    return logger
