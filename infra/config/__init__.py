"""Typed stack config: one pydantic model per stack kind, loaded from the `mlinfra` namespace."""
from infra.config.stack import KINDS, NAMESPACE, StackConfig, load, namespace_values, validate

__all__ = ["KINDS", "NAMESPACE", "StackConfig", "load", "namespace_values", "validate"]
