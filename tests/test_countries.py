"""The shared country table: every assigned ISO 3166-1 alpha-2 code, and the one way to validate it."""

from __future__ import annotations

import pytest

from chartgw.core.countries import COUNTRIES, GLOBAL, country_code, country_name


def test_all_assigned_codes() -> None:
    assert len(COUNTRIES) == 249


def test_codes_are_two_lowercase_ascii_letters() -> None:
    for code in COUNTRIES:
        assert len(code) == 2
        assert code.isascii() and code.isalpha() and code.islower()


def test_codes_are_sorted() -> None:
    assert list(COUNTRIES) == sorted(COUNTRIES)


@pytest.mark.parametrize(
    ("code", "name"),
    [
        ("us", "United States"),
        ("gb", "United Kingdom"),
        ("kr", "South Korea"),
        ("de", "Germany"),
        ("jp", "Japan"),
        ("br", "Brazil"),
    ],
)
def test_names(code: str, name: str) -> None:
    assert COUNTRIES[code] == name
    assert country_name(code) == name


def test_global_name() -> None:
    assert country_name(GLOBAL) == "Global"


def test_unknown_name() -> None:
    with pytest.raises(KeyError):
        country_name("xx")


@pytest.mark.parametrize(
    ("value", "code"),
    [("US", "us"), ("us", "us"), ("global", "global"), ("GLOBAL", "global"), ("Gb", "gb")],
)
def test_country_code(value: str, code: str) -> None:
    assert country_code(value) == code


@pytest.mark.parametrize("value", ["xx", "usa", "", " us", "us ", "uk"])
def test_country_code_rejects(value: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        country_code(value)
    assert str(excinfo.value) == (
        f"unknown country {value!r}; use 'global' or an ISO 3166-1 alpha-2 code such as 'us'"
    )


def test_a_request_names_a_country_in_lower_case_as_the_document_does() -> None:
    """One rule for the check and the OpenAPI document: every parameter whose schema is the `Country` enum (lower
    case) accepts exactly the enum's values; "US" is a 422 pointing at "us", an unknown code its own error."""
    from chartgw.api.params import Param
    from chartgw.groups import GROUPS

    params: list[Param] = [p for g in GROUPS for r in g.routes for p in r.params if p.component()]
    assert {p.name for p in params} >= {"country", "code2"}
    for param in params:
        component = param.component()
        assert component is not None and component[0] == "Country"
        assert component[1]["enum"] == [GLOBAL, *COUNTRIES] and all(v == v.lower() for v in component[1]["enum"])
        for value in component[1]["enum"]:
            assert param.validate(value) == (value, None)
        for value, msg in (("US", "country codes are lower case: use 'us', not 'US'"),
                           ("Global", "country codes are lower case: use 'global', not 'Global'"),
                           ("ZZ", "unknown country 'ZZ'; use 'global' or an ISO 3166-1 alpha-2 code such as 'us'")):
            value_got, error = param.validate(value)
            assert value_got is None and error is not None and error["msg"] == f"Value error, {msg}", (param, value)
    # /artist-history's comma-separated markets: its document's pattern is lower case, and so is its check
    from chartgw.index.artist_history.query import route_params

    markets = next(p for p in route_params(False) if p.name == "markets")
    assert markets.validate("us,global") == (("us", "global"), None)
    assert markets.validate("us,KR")[1] is not None
