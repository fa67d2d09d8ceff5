"""Stack rules do per-resource work once per stack: a fact about the whole stack (its role) asked for each
resource is computed once, so a rule's pass stays linear in the stack's size (benchmarks/policy_bench.py)."""

from dataclasses import replace

from policies.model import Resource, Stack
from policies.readers import aws
from policies.rules.training import training_registry_writes_own_run_only
from tests.policies.policy_fixtures import training_resources


def test_a_stacks_derived_fact_is_computed_once():
    stack = Stack([Resource("aws:s3/bucket:Bucket", {}, urn="u")])
    calls = []
    assert stack.derived("n", lambda s: calls.append(s) or len(s.resources)) == 1
    assert stack.derived("n", lambda s: calls.append(s) or 99) == 1
    assert calls == [stack]
    assert Stack(stack.resources).derived("n", lambda s: 2) == 2  # per stack, not per process


def test_the_stack_role_is_read_once_however_many_resources_ask(monkeypatch):
    calls = []
    compute = aws._stack_role
    monkeypatch.setattr(aws, "_stack_role", lambda stack: calls.append(stack) or compute(stack))
    resources = training_resources()
    untagged = [replace(r, props={k: v for k, v in r.props.items() if k != "tags"}, parent="") for r in resources]
    stack = Stack(untagged * 20)
    assert [aws.role_in_stack(r, stack) for r in stack.resources] == [None] * len(stack.resources)
    training = Stack(resources * 20)
    training_registry_writes_own_run_only.RULE.check(training, {})
    assert [aws.stack_role(training)] * 3 == ["training"] * 3
    assert calls == [stack, training]
