"""The misconfiguration corpus: small mutations of the demo stacks' offline previews, each naming the rule that
must catch it (tests/policies/test_policy_corpus.py runs the whole pack on each)."""

from tests.policies.corpus import serving_registry, training, valid

ENTRIES = training.ENTRIES + serving_registry.ENTRIES
VALID_MUTATIONS = valid.VALID_MUTATIONS
