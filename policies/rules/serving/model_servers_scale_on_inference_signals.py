"""Model servers scale on inference signals: every Deployment (or StatefulSet) that runs on accelerators,
or is labelled app.kubernetes.io/component=inference, is the target of a KEDA ScaledObject or an HPA,
and none of its triggers or metrics is CPU or memory. An accelerator server saturates on queue depth
(vllm:num_requests_waiting) and KV-cache use (vllm:gpu_cache_usage_perc) long before its CPU does.

Advisory: which signal fits a server, and whether a small one may keep a fixed replica count, are
judgement; the replica bounds, a cost matter, are the mandatory autoscalers-have-replica-bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.model import Finding, Stack, StackRule
from policies.readers.workloads import (
    AUTOSCALERS,
    WORKLOADS,
    autoscaler_kind,
    is_model_server,
    scale_target,
    signals,
    workload_key,
)

NAME = "model-servers-scale-on-inference-signals"
_FIX = "scale on queue depth (vllm:num_requests_waiting) or KV-cache use (vllm:gpu_cache_usage_perc)"


def check(stack: Stack, config: Mapping[str, Any]) -> list[Finding]:
    autoscalers = stack.of_type(*AUTOSCALERS)
    findings = []
    for workload in stack.of_type(*WORKLOADS):
        key = workload_key(workload)
        if key is None or not is_model_server(workload):
            continue
        kind, namespace, name = key
        scalers = [a for a in autoscalers if scale_target(a) == key]
        if not scalers:
            findings.append(
                Finding(
                    workload.urn,
                    (
                        f"model server {workload.label} ({kind} {namespace}/{name}) has no autoscaler; add a "
                        f"KEDA ScaledObject "
                        f"with Prometheus triggers (or an HPA on Pods metrics) that {_FIX}, with min and max replicas"
                    ),
                )
            )
        for scaler in scalers:
            for signal in signals(scaler):
                if not signal.cpu_or_memory:
                    continue
                on = (
                    "CPU (80% utilisation, the HPA default, as no metrics are set)"
                    if signal.where == "(default)"
                    else f"{signal.what} ({signal.where})"
                )
                findings.append(
                    Finding(
                        scaler.urn,
                        (
                            f"{autoscaler_kind(scaler)} {scaler.label} scales model server {workload.label} on "
                            f"{on}, which "
                            f"does not track accelerator load; {_FIX} instead"
                        ),
                    )
                )
            if not signals(scaler):
                findings.append(
                    Finding(
                        scaler.urn,
                        (
                            f"{autoscaler_kind(scaler)} {scaler.label} of model server {workload.label} has no "
                            f"triggers; "
                            f"add Prometheus triggers that {_FIX}"
                        ),
                    )
                )
    return findings


RULE = StackRule(
    NAME,
    "Model servers are autoscaled on inference signals (queue depth, KV cache), not CPU or memory.",
    "advisory",
    check,
)
