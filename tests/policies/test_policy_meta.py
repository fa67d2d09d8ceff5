"""The pack's house rules: one rule per file, unique kebab-case names, every rule registered and tested."""

import importlib
import pkgutil
import re
from pathlib import Path

import policies.rules
from policies.model import ResourceRule, StackRule
from policies.pack import RULES

KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)+$")
AREAS = ("training", "serving", "registry", "everywhere", "cost")
MODULES = [
    importlib.import_module(m.name)
    for m in pkgutil.walk_packages(policies.rules.__path__, "policies.rules.")
    if not m.ispkg
]


def test_one_rule_per_module_named_after_it():
    for module in MODULES:
        rule = module.RULE
        assert isinstance(rule, (ResourceRule, StackRule))
        assert rule.name == module.NAME == module.__name__.rsplit(".", 1)[1].replace("_", "-")
        assert module.__doc__ and rule.description and "\n" not in rule.description


def test_every_rule_lives_in_an_area_folder():
    assert [m.__name__ for m in MODULES if m.__name__.split(".")[2] not in AREAS or m.__name__.count(".") != 3] == []


def test_names_are_unique_kebab_case():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    assert [n for n in names if not KEBAB.match(n)] == []


def test_every_rule_module_is_registered():
    assert sorted(m.RULE.name for m in MODULES) == sorted(r.name for r in RULES)
    assert len(RULES) >= 30


def test_enforcement_levels_are_set_by_the_pack():
    assert {r.enforcement for r in RULES} <= {"mandatory", "advisory"}
    # Advisory where judgement is needed: whether to bring events to a registry no run uses, which taint and
    # which scaling signal suit a pool or server, and prices the catalog cannot know.
    assert [r.name for r in RULES if r.enforcement == "advisory"] == [
        "registry-bucket-sends-events-to-eventbridge",
        "accelerator-node-pools-tainted",
        "model-servers-scale-on-inference-signals",
        "instance-types-have-catalog-price",
    ]


def test_every_rule_has_a_test_that_names_it():
    here = Path(__file__).parent
    text = "\n".join(p.read_text(encoding="utf-8") for p in here.glob("test_*.py") if p.name != Path(__file__).name)
    untested = [m.NAME for m in MODULES if m.__name__.rsplit(".", 1)[1] not in text and m.NAME not in text]
    assert untested == []


def test_resource_rules_declare_the_types_they_read():
    assert [r.name for r in RULES if isinstance(r, ResourceRule) and not r.types] == []
