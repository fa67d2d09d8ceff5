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

    def selects(self, labels: dict[str, Any]) -> bool:
        return bool(self.selector) and all(labels.get(k) == v for k, v in self.selector.items())


def _config(values: dict[str, Any]) -> dict[str, Any]:
    extension = dict_at(values.get("inferenceExtension"))
    name = extension.get("pluginsConfigFile")
    text = dict_at(extension.get("pluginsCustomConfig")).get(name) if isinstance(name, str) else None
    if not isinstance(text, str):
        return {}  # the chart's default config: no flow control
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def pickers(stack: Stack) -> list[Picker]:
    found = []
    for release in stack.of_type(tokens.K8S_HELM_RELEASE):
        chart = release.get("chart")
        if not isinstance(chart, str) or not chart.endswith(CHART_SUFFIX):
            continue
        values = dict_at(release.get("values"))
        selector = dict_at(dict_at(dict_at(values.get("inferencePool")).get("modelServers")).get("matchLabels"))
        config = _config(values)
        gates = config.get("featureGates")
        holds = isinstance(gates, list) and "flowControl" in gates
        ttl = dict_at(config.get("flowControl")).get("defaultRequestTTL")
        found.append(Picker(release, selector, holds, None if is_unknown(ttl) or ttl is None else str(ttl)))
    return found
