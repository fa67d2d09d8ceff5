"""The mlinfra CrossGuard pack. `pulumi preview --policy-pack policies` runs this file (from this
directory, in the virtualenv PulumiPolicy.yaml names, where the project is installed: the rules read its
facts), and so does `python -m infra policy` offline.
It only builds the pack; the rules are in policies/rules/, registered in policies/pack.py."""

import gc
import os

from pulumi_policy import EnforcementLevel, PolicyPack

from policies import analyzer
from policies.adapters import to_policy
from policies.model import ResourceRule
from policies.pack import PACK_NAME, RULES

# A large stack's AnalyzeStack builds a few objects per property of every resource, all alive until it ends; at
# the default first threshold (700) the cyclic collector walks them again and again, a quarter of the pack's time
# on 10,000 resources (benchmarks/RESULTS.md). A larger one makes those passes rare; cycles are still collected.
gc.set_threshold(50_000, *gc.get_threshold()[1:])

if os.environ.get("MLINFRA_POLICY_SDK_SERVICER") != "1":  # tests compare with the SDK's own servicer
    analyzer.install({rule.name: rule.applies_to for rule in RULES if isinstance(rule, ResourceRule)})

PolicyPack(
    name=PACK_NAME,
    policies=[to_policy(rule) for rule in RULES],
    enforcement_level=EnforcementLevel.MANDATORY,  # each rule sets its own; this is the fallback
    description="mlinfra guard rails: fabric, Lustre, teardown safety, registry, serving, role separation, "
    "least privilege and cost",
)
