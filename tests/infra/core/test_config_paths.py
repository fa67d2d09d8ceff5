import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.core.errors import InputError
from infra.core.paths import parse_override, set_path, split_key, typed_value


def test_split_key_keeps_namespace_on_first_segment():
    assert split_key("mlinfra:training.instanceType") == ("mlinfra:training", ["instanceType"])
    assert split_key("mlinfra:serving.models[1].name") == ("mlinfra:serving", ["models", 1, "name"])
    assert split_key('mlinfra:a["dotted.key"].b') == ("mlinfra:a", ["dotted.key", "b"])


def test_values_are_typed_as_the_cli_types_path_values():
    assert typed_value("true") is True and typed_value("false") is False
    assert typed_value("42") == 42 and typed_value("-3") == -3
    assert typed_value("4.5") == "4.5" and typed_value("True") == "True"


def test_set_path_creates_nested_maps_and_lists():
    config = {"mlinfra:kind": "registry"}
    set_path(config, "mlinfra:registry.objectLock.enabled", "true")
    set_path(config, "mlinfra:serving.models[0].name", "llama")
    set_path(config, "mlinfra:serving.models[0].minReplicas", "2")
    assert config["mlinfra:registry"] == {"objectLock": {"enabled": True}}
    assert config["mlinfra:serving"] == {"models": [{"name": "llama", "minReplicas": 2}]}


def test_top_level_values_stay_strings():
    config = {}
    set_path(config, "mlinfra:registryStack", "123")
    assert config == {"mlinfra:registryStack": "123"}


def test_override_keeps_siblings():
    config = {"mlinfra:registry": {"lifecycle": {"noncurrentVersionDays": 90, "noncurrentVersionsKept": 3}}}
    set_path(config, "mlinfra:registry.lifecycle.noncurrentVersionDays", "30")
    assert config["mlinfra:registry"]["lifecycle"] == {"noncurrentVersionDays": 30, "noncurrentVersionsKept": 3}


@pytest.mark.parametrize(
    "text, message",
    [
        ("novalue", "novalue: expected -c KEY=VALUE, e.g. -c mlinfra:training.nodeCount=8"),
        ("nonamespace=1", "nonamespace: config keys are namespaced, e.g. mlinfra:training.nodeCount"),
        ("mlinfra:a[x]=1", "mlinfra:a[x]: list index must be a non-negative integer, got [x]"),
        ('mlinfra:a["open=1', 'mlinfra:a["open: unterminated ["..."] segment'),
        ("mlinfra:a..b=1", "mlinfra:a..b: empty path segment"),
        (":x=1", ":x: the namespace before ':' is empty, e.g. mlinfra:training.nodeCount"),
    ],
)
def test_bad_overrides_name_the_key(text, message):
    with pytest.raises(InputError) as caught:
        parse_override(text)
    assert str(caught.value) == message


def test_list_index_past_the_end_is_an_error():
    with pytest.raises(InputError, match="list index 3 is past the end"):
        set_path({}, "mlinfra:serving.models[3]", "x")


@given(
    st.lists(st.from_regex(r"[a-zA-Z][a-zA-Z0-9]{0,8}", fullmatch=True), min_size=1, max_size=4),
    st.text(alphabet="abcxyz0123456789-", min_size=1, max_size=10),
)
def test_any_dotted_path_round_trips(parts, raw):
    config = {}
    set_path(config, "mlinfra:" + ".".join(parts), raw)
    node = config["mlinfra:" + parts[0]]
    for part in parts[1:]:
        node = node[part]
    assert node == (typed_value(raw) if len(parts) > 1 else raw)
