"""The mlinfra CrossGuard pack. `pulumi preview --policy-pack policies` runs this file (from this
directory, in the virtualenv PulumiPolicy.yaml names), and so does `python -m infra policy` offline.
It only builds the pack; the rules are in policies/rules/, registered in policies/pack.py."""
import sys
from pathlib import Path

# The rules read the project's facts (instance catalog, Lustre steps, EFA layout): import from its root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policies.adapters import to_policy  # noqa: E402
from policies.pack import PACK_NAME, RULES  # noqa: E402

PolicyPack(
    name=PACK_NAME,
    policies=[to_policy(rule) for rule in RULES],
    enforcement_level=EnforcementLevel.MANDATORY,  # each rule sets its own; this is the fallback
    description="mlinfra guard rails: fabric, Lustre, teardown safety, registry, serving, role separation, "
                "least privilege and cost",
)
