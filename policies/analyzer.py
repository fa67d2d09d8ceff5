"""The pack's analyzer: the policy SDK's own servicer, doing each resource's work once per request.

The SDK (pulumi_policy 1.21, `_PolicyAnalyzerServicer`) decodes a resource inside its loop over policies:
Analyze runs every resource policy for every resource, decoding the resource's properties
(`deserialize_properties(json_format.MessageToDict(...))`, the read-only `unknown_checking_proxy`, its options
and provider) once per policy; AnalyzeStack rebuilds the whole stack's resources once per stack policy. With
this pack's 70 rules that is most of its time on a large stack, for `pulumi preview --policy-pack policies` and
`python -m infra policy` alike. `Servicer` keeps the SDK's code for everything it does not change:

- Analyze is the SDK's, over the resource policies whose rule reads the resource's type (a rule that does not
  read a type reports nothing for it: `policies.adapters` returns at once; the SDK's loop skips stack policies),
  with the decoding done once per request and shared by those policies, which only read it (the proxy refuses
  writes; the rules copy what they read), and the runtime's settings taken from the environment once per
  process rather than per call;
- AnalyzeStack builds the stack's resources once, as the SDK builds them, and runs every stack policy on them
  with the SDK's enforcement levels, configs, violation reports and error handling.

`install` puts it in place of the SDK's servicer before the pack starts. MLINFRA_POLICY_SDK_SERVICER=1 runs the
SDK's own servicer instead; tests compare the two on the demo stacks and crafted violations.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from inspect import isawaitable
from typing import Any

from pulumi.runtime import proto
from pulumi_policy import policy as sdk

_local = threading.local()
# The SDK servicer's private attributes it uses (name-mangled), and the module names `install` replaces.
_POLICIES = "_PolicyAnalyzerServicer__policies"
_PACK_NAME = "_PolicyAnalyzerServicer__policy_pack_name"
_PACK_VERSION = "_PolicyAnalyzerServicer__policy_pack_version"
_STACK_TAGS = "_PolicyAnalyzerServicer__stack_tags"
_SERVICER = "_PolicyAnalyzerServicer"
_INSTALLED = "_mlinfra_servicer"


def _request_cache() -> dict[Any, Any] | None:
    return getattr(_local, "cache", None)


def _once_per_request(fn: Callable[..., Any], arity: int = 1) -> Callable[..., Any]:
    """`fn(value)` (or `self.fn(value)` with arity 2) remembered for the current request by the identity of
    `value` (the entry keeps `value` alive, so its id is not reused); other calls, and calls outside a
    request, pass through."""

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        cache = _request_cache()
        if cache is None or len(args) != arity:
            return fn(*args)
        value = args[-1]
        key = (fn.__name__, id(value))
        hit = cache.get(key)
        if hit is not None and hit[0] is value:
            return hit[1]
        result = fn(*args)
        cache[key] = (value, result)
        return result

    return call


class _JsonFormat:
    """The SDK's `json_format` module, with MessageToDict remembered per request."""

    def __init__(self, module: Any):
        self._module = module
        self.MessageToDict = _once_per_request(module.MessageToDict)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class _PoliciesForTheRequest(list[Any]):
    """The pack's policies; during an Analyze request, only the resource policies that read its type (the SDK's
    Analyze skips every stack policy, without a word in its answer)."""

    def __init__(self, policies: list[Any], reads: Mapping[str, Callable[[str], bool]]):
        super().__init__(policies)
        self._reads = reads
        self._by_type: dict[str, tuple[Any, ...]] = {}  # resource type -> its policies, in the pack's order

    def __iter__(self) -> Iterator[Any]:
        resource_type = getattr(_local, "resource_type", None)
        if resource_type is None:
            return super().__iter__()
        chosen = self._by_type.get(resource_type)
        if chosen is None:
            chosen = tuple(
                policy
                for policy in super().__iter__()
                if isinstance(policy, sdk.ResourceValidationPolicy)
                and ((applies := self._reads.get(policy.name)) is None or applies(resource_type))
            )
            self._by_type[resource_type] = chosen
        return iter(chosen)


class Servicer(sdk._PolicyAnalyzerServicer):
    reads: Mapping[str, Callable[[str], bool]] = {}  # policy name -> does its rule read this resource type

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._configured = False
        setattr(self, _POLICIES, _PoliciesForTheRequest(getattr(self, _POLICIES), self.reads))

    def _configure_runtime_settings(self) -> None:
        # The SDK sets the runtime's config and settings from the process's environment on every call; that
        # environment is the pack's from its start, so once is the same.
        if not self._configured:
            super()._configure_runtime_settings()
            self._configured = True

    def Analyze(self, request: Any, context: Any) -> Any:
        _local.cache, _local.resource_type = {}, request.type
        try:
            return super().Analyze(request, context)
        finally:
            _local.cache, _local.resource_type = None, None

    def AnalyzeStack(self, request: Any, _context: Any) -> Any:
        self._configure_runtime_settings()
        response = proto.AnalyzeResponse()
        resources = self._stack_resources(request)
        for policy in getattr(self, _POLICIES):
            level = self._get_enforcement_level(policy)
            if level == sdk.EnforcementLevel.DISABLED or not isinstance(policy, sdk.StackValidationPolicy):
                continue
            if level == sdk.EnforcementLevel.REMEDIATE:  # stack policies cannot remediate: mandatory
                level = sdk.EnforcementLevel.MANDATORY
            report = self._create_report_violation(response, policy.name, policy.description, level, policy.severity)
            args = sdk.StackValidationArgs(resources, self._get_policy_config(policy.name), self._stack_tags())
            self._validate(policy, args, report, response)
        return response

    def _stack_resources(self, request: Any) -> list[Any]:
        """The stack's resources as the SDK builds them, parents and dependencies linked: once per request."""
        built: list[tuple[Any, Any, list[str], dict[str, list[str]]]] = []
        for r in request.resources:
            props = sdk.unknown_checking_proxy(sdk.deserialize_properties(sdk.json_format.MessageToDict(r.properties)))
            resource = sdk.PolicyResource(
                r.type,
                props,
                r.urn,
                r.name,
                self._get_resource_options(r),
                self._get_provider_resource(r),
                None,
                [],
                {},
            )
            links = {k: list(v.urns) for k, v in r.propertyDependencies.items()}
            built.append((resource, r.parent, list(r.dependencies), links))
        by_urn = {resource.urn: resource for resource, *_ in built}
        for resource, parent, dependencies, links in built:
            if parent is not None and parent in by_urn:
                resource.parent = by_urn[parent]
            resource.dependencies.extend(by_urn[d] for d in dependencies if d in by_urn)
            for key, urns in links.items():
                resource.property_dependencies[key] = [by_urn[d] for d in urns if d in by_urn]
        return [resource for resource, *_ in built]

    def _validate(self, policy: Any, args: Any, report: Any, response: Any) -> None:
        name, version = getattr(self, _PACK_NAME), getattr(self, _PACK_VERSION)
        try:
            result = policy.validate(args, report)
            if isawaitable(result):
                loop = asyncio.new_event_loop()
                loop.run_until_complete(result)
                loop.close()
        except sdk.UnknownValueError as error:
            response.diagnostics.append(
                proto.AnalyzeDiagnostic(
                    policyName=policy.name,
                    policyPackName=name,
                    policyPackVersion=version,
                    message=f"can't run policy '{policy.name}' from policy pack '{name}@v{version}' during preview: "
                    f"{error.message}",
                    urn="",
                    description=policy.description,
                    enforcementLevel=self._map_enforcement_level(sdk.EnforcementLevel.ADVISORY),
                )
            )
        except sdk._NotApplicableError as error:
            response.not_applicable.append(
                proto.PolicyNotApplicable(policy_name=policy.name, reason=error.reason or "")
            )

    def _stack_tags(self) -> Mapping[str, str]:
        tags: Mapping[str, str] = getattr(self, _STACK_TAGS)
        return tags


def install(reads: Mapping[str, Callable[[str], bool]]) -> None:
    """Run the pack with `Servicer`; `reads` maps each resource policy to its rule's type test."""
    if getattr(sdk, _INSTALLED, False):
        return
    sdk.json_format = _JsonFormat(sdk.json_format)
    sdk.deserialize_properties = _once_per_request(sdk.deserialize_properties)
    sdk.unknown_checking_proxy = _once_per_request(sdk.unknown_checking_proxy)
    base = sdk._PolicyAnalyzerServicer
    for name in ("_get_resource_options", "_get_provider_resource"):
        setattr(base, name, _once_per_request(getattr(base, name), arity=2))
    Servicer.reads = dict(reads)
    setattr(sdk, _SERVICER, Servicer)
    setattr(sdk, _INSTALLED, True)
