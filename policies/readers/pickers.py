"""Reading the front door's endpoint pickers from a preview (pure): the inferencepool chart's Helm releases, the
model server pods each one's InferencePool holds, and whether its picker holds requests while none serves (flow
control in the config file it is given)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from infra.core.shapes import dict_at
from infra.providers import tokens
from policies.model import Resource, Stack, is_unknown

CHART_SUFFIX = "/inferencepool"


@dataclass(frozen=True)
class Picker:
    release: Resource
    selector: dict[str, Any]  # the InferencePool's modelServers.matchLabels
    holds: bool  # its config turns flow control on: requests wait while no replica can take them
    hold: str | None  # flowControl.defaultRequestTTL as written (None: until the client gives up)
    max_requests: Any  # flowControl.maxRequests as written (None: no bound)
    config_error: str | None = None  # why its config file is not YAML (it then holds nothing)

    def selects(self, labels: dict[str, Any]) -> bool:
        return bool(self.selector) and all(labels.get(k) == v for k, v in self.selector.items())


def _config(values: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The picker's config file, parsed, and why it could not be (the chart's default config: empty, no flow
    control)."""
    extension = dict_at(values.get("inferenceExtension"))
    name = extension.get("pluginsConfigFile")
    text = dict_at(extension.get("pluginsCustomConfig")).get(name) if isinstance(name, str) else None
    if not isinstance(text, str):
        return {}, None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return {}, f"not YAML: {error}"
    return (loaded if isinstance(loaded, dict) else {}), None


def pickers(stack: Stack) -> list[Picker]:
    found = []
    for release in stack.of_type(tokens.K8S_HELM_RELEASE):
        chart = release.get("chart")
        if not isinstance(chart, str) or not chart.endswith(CHART_SUFFIX):
            continue
        values = dict_at(release.get("values"))
        selector = dict_at(dict_at(dict_at(values.get("inferencePool")).get("modelServers")).get("matchLabels"))
        config, error = _config(values)
        gates = config.get("featureGates")
        holds = isinstance(gates, list) and "flowControl" in gates
        flow = dict_at(config.get("flowControl"))
        ttl = flow.get("defaultRequestTTL")
        hold = None if is_unknown(ttl) or ttl is None else str(ttl)
        found.append(Picker(release, selector, holds, hold, flow.get("maxRequests"), error))
    return found
