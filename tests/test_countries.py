"""The shared country table: every assigned ISO 3166-1 alpha-2 code, and the one way to validate it."""

from __future__ import annotations

import pytest

from chartgw.countries import COUNTRIES, GLOBAL, country_code, country_name


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
