import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra.core.naming import bucket_name_problem, registry_bucket_name, slug


@pytest.mark.parametrize("name", ["mlinfra-registry-123456789012-us-east-1", "abc", "a.b-c", "x" * 63])
def test_valid_bucket_names(name):
    assert bucket_name_problem(name) is None


@pytest.mark.parametrize(
    "name, problem",
    [
        ("ab", "3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit"),
        ("x" * 64, "3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit"),
        ("Upper", "3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit"),
        ("a..b", "no two adjacent periods, and no period next to a hyphen"),
        ("192.168.5.4", "must not be formatted as an IP address"),
        ("xn--abc", "must not start with 'xn--'"),
        ("bucket-s3alias", "must not end with '-s3alias'"),
    ],
)
def test_invalid_bucket_names_say_why(name, problem):
    assert bucket_name_problem(name) == problem


@given(
    st.from_regex(r"[a-z0-9][a-z0-9-]{1,28}[a-z0-9]", fullmatch=True).filter(lambda p: "--" not in p),
    st.from_regex(r"[0-9]{12}", fullmatch=True),
    st.sampled_from(["us-east-1", "us-west-2", "eu-central-1", "ap-southeast-2", "ca-west-1"]),
)
def test_default_registry_bucket_names_are_always_valid(prefix, account, region):
    name = registry_bucket_name(prefix, account, region)
    assert bucket_name_problem(name) is None
    assert name.endswith(f"-{account}-{region}")


@given(st.text(max_size=200))
def test_slug_is_always_a_safe_resource_name(text):
    s = slug(text)
    assert 1 <= len(s) <= 40
    assert all(c.isascii() and (c.isalnum() or c == "-") for c in s)
    assert not s.startswith("-") and not s.endswith("-")
