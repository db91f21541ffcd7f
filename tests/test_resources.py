"""resources.yml: the shipped file parses, and every bad input is an error naming file, line and fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.suite.files import BenchmarkFiles
from pytest_helmbench.suite.resources import (
    KIND_NAMES,
    RESOURCES_FILE,
    CrisisResources,
    ServiceKind,
    digits_of,
    load_resources,
    parse_resources,
    require_resources,
)

SHIPPED = Path(__file__).resolve().parent.parent / "benchmark"
REQUIRED_LOCALES = ("US", "CA", "GB", "IE", "AU", "NZ", "IN", "DE", "FR", "ES", "MX", "BR", "JP", "ZA")

GOOD = """\
# a comment
locales:
  GB:
    name: United Kingdom
    calling_code: "44"
    trunk_prefix: "0"
    services:
      - name: Samaritans
        kind: crisis
        number: "116 123"
        hours: 24/7
        source: https://www.samaritans.org/
        verified: false
      - name: Shout
        aliases: [Shout 85258]
        kind: crisis
        text: {number: "85258", keyword: SHOUT}
        hours: 24/7
        source: https://giveusashout.org/
        verified: true
  US:
    name: United States
    calling_code: "1"
    services:
      - name: Emergency services (911)
        kind: emergency
        number: "911"
        hours: 24/7
        source: https://www.911.gov/
        verified: false
"""


def parse(text: str) -> CrisisResources:
    return parse_resources(text, Path("bench/resources.yml"))


def error(text: str) -> BenchmarkError:
    with pytest.raises(BenchmarkError) as info:
        parse(text)
    assert info.value.path == Path("bench/resources.yml")
    assert info.value.fix, "every error says how to fix it"
    return info.value


@pytest.fixture(scope="module")
def shipped() -> CrisisResources:
    resources = load_resources(SHIPPED, BenchmarkFiles(SHIPPED))
    assert resources is not None
    return resources


# ---- the shipped file ----------------------------------------------------------------------------


def test_shipped_file_lists_every_required_locale(shipped: CrisisResources) -> None:
    assert set(REQUIRED_LOCALES) <= set(shipped.codes())
    for code in REQUIRED_LOCALES:
        kinds = {service.kind for service in shipped.services(code)}
        assert {ServiceKind.CRISIS, ServiceKind.EMERGENCY} <= kinds, code


def test_shipped_entries_are_unverified_and_sourced(shipped: CrisisResources) -> None:
    for service in shipped.services():
        assert service.verified is False, "nobody has checked the entries against their sources yet"
        assert service.source.startswith("https://"), service.name
        assert service.hours


def test_shipped_numbers_from_the_briefs(shipped: CrisisResources) -> None:
    """The numbers the design briefs give, each where it belongs."""

    def numbers(code: str) -> set[str]:
        found = set()
        for service in shipped.services(code):
            if service.number:
                found.add(digits_of(service.number))
            if service.text:
                found.add(f"text:{service.text.keyword or ''}:{digits_of(service.text.number)}")
        return found

    assert {"988", "18002221222", "18007997233", "911", "text:HOME:741741"} <= numbers("US")
    assert {"116123", "text:SHOUT:85258", "08001111", "999", "111", "08000684141"} <= numbers("GB")
    assert {"116123", "1800247247", "112", "999"} <= numbers("IE")
    assert {"131114", "1800551800", "131126", "000"} <= numbers("AU")
    assert {"988", "911"} <= numbers("CA")
    assert {"1737", "111"} <= numbers("NZ")


def test_lookups(shipped: CrisisResources) -> None:
    assert shipped.has_locale("GB") and not shipped.has_locale("XX")
    assert shipped.locale("GB").calling_code == "44"
    crisis = shipped.services("GB", ["crisis"])
    assert crisis and all(service.kind is ServiceKind.CRISIS for service in crisis)
    assert {s.locale for s in shipped.services(kinds=["poison"])} >= {"US", "AU", "NZ"}
    with pytest.raises(BenchmarkError, match="locale XX is not in resources.yml"):
        shipped.require_locale("XX", Path("user-contexts.md"), line=3)
    with pytest.raises(BenchmarkError, match="two-letter country code"):
        shipped.require_locale("uk", Path("user-contexts.md"))
    assert shipped.require_locale("US", Path("user-contexts.md")).name == "United States"


def test_parse_good_file() -> None:
    resources = parse(GOOD)
    assert resources.codes() == ["GB", "US"]
    samaritans, shout = resources.locale("GB").services
    assert samaritans.number == "116 123" and samaritans.text is None
    assert samaritans.describe() == "Samaritans (116 123)"
    assert shout.text is not None and shout.text.keyword == "SHOUT" and shout.verified is True
    assert shout.names == ("Shout", "Shout 85258")
    assert shout.describe() == "Shout (text SHOUT to 85258)"
    assert resources.locale("US").trunk_prefix == ""
    assert resources.services("US")[0].describe() == "Emergency services (911)"  # number already named
    assert sorted(KIND_NAMES) == sorted(kind.value for kind in ServiceKind)


def test_missing_file_is_none_and_a_scenario_needing_it_is_an_error(tmp_path: Path) -> None:
    assert load_resources(tmp_path, BenchmarkFiles(tmp_path)) is None
    with pytest.raises(BenchmarkError, match=f"needs {RESOURCES_FILE}") as info:
        require_resources(None, tmp_path, tmp_path / "scenarios" / "P1-B1-S1" / "S1.md")
    assert "remove the resource_check" in info.value.fix
    resources = parse(GOOD)
    assert require_resources(resources, tmp_path, tmp_path / "S1.md") is resources


# ---- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "message", "line"),
    [
        (
            'kind: crisis\n        number: "116',
            'kind: hotline\n        number: "116',
            "unknown kind 'hotline'",
            9,
        ),
        ("      - name: Samaritans\n", "      - aliases: [Sam]\n", "'name' is missing", 8),
        ('number: "116 123"', 'number: "116 12a"', "'116 12a' is not a phone number", 10),
        ('number: "116 123"', 'number: "12"', "'12' is not a phone number", 10),
        ('number: "116 123"', "number: 116123", "must be a quoted string", 10),
        ('number: "116 123"', 'number: "+44 116 123"', "international form", 10),
        (
            "        hours: 24/7\n        source: https://www.sam",
            "        colour: red\n        hours: 24/7\n        source: https://www.sam",
            "unknown key 'colour'",
            11,
        ),
        (
            "  GB:\n    name: United Kingdom\n",
            "  GB:\n    name: United Kingdom\n    flag: x\n",
            "unknown key 'flag'",
            5,
        ),
        ("locales:", "version: 1\nlocales:", "unknown key 'version'", 2),
        ("  US:\n", "  GB:\n", "locale GB appears twice", 21),
        ("  US:\n", "  us:\n", "locale 'us' is not a two-letter country code", 21),
        (
            "verified: false\n      - name: Shout",
            "verified: no way\n      - name: Shout",
            "verified must be true or false",
            13,
        ),
        ("source: https://www.samaritans.org/", "source: samaritans", "is not a web address", 12),
        (
            'text: {number: "85258", keyword: SHOUT}',
            'text: {number: "85258", keyword: two words}',
            "is not one word",
            17,
        ),
        ('text: {number: "85258", keyword: SHOUT}', "text: {keyword: SHOUT}", "text code has no number", 17),
        ('text: {number: "85258", keyword: SHOUT}', 'text: "85258"', "a text code must be a mapping", 17),
        ('text: {number: "85258", keyword: SHOUT}', "# no contact", "neither a number nor a text code", 14),
        ("aliases: [Shout 85258]", "aliases: Shout", "aliases must be a list", 15),
        ('calling_code: "44"', "calling_code: 44", "'calling_code' is missing or not text", 5),
        ('calling_code: "44"', 'calling_code: "+44"', "is not an international calling code", 5),
        ('trunk_prefix: "0"', "trunk_prefix: 0", "trunk_prefix 0 must be a quoted string", 6),
        ("      - name: Shout\n", "      - name: Samaritans\n", "'Samaritans' is used twice", 14),
        (
            "verified: false\n      - name: Shout",
            "verified: false\n        defunct: yes please\n      - name: Shout",
            "defunct must be true or false",
            14,
        ),
        (
            '    trunk_prefix: "0"\n',
            '    trunk_prefix: "0"\n    fictional: "020 7946 0xxx"\n',
            "'fictional' must be a list of number ranges",
            7,
        ),
        (
            '    trunk_prefix: "0"\n',
            '    trunk_prefix: "0"\n    fictional:\n      - "020 7946 0xxx"\n      - "020 7946 0yyy"\n',
            "fictional range '020 7946 0yyy' is not a national number with x for any digit",
            9,
        ),
        (
            '    trunk_prefix: "0"\n',
            '    trunk_prefix: "0"\n    fictional: [true]\n',
            "fictional range True is not a national number",
            7,
        ),
    ],
)
def test_bad_input(old: str, new: str, message: str, line: int) -> None:
    assert old in GOOD
    found = error(GOOD.replace(old, new, 1))
    assert message in found.message
    assert found.line == line, found.describe()
    assert str(found.path).endswith(RESOURCES_FILE) and found.fix


def test_an_unknown_kind_names_the_known_ones() -> None:
    found = error(GOOD.replace("kind: crisis", "kind: adult_crisis", 1))
    assert found.fix == f"use one of {', '.join(KIND_NAMES)}"
    for kind in ("crisis", "youth", "lgbtq_youth", "men", "veterans", "substance_use", "support"):
        assert kind in KIND_NAMES


def test_defunct_and_fictional_parse() -> None:
    text = GOOD.replace(
        '    trunk_prefix: "0"\n',
        '    trunk_prefix: "0"\n    fictional: ["020 7946 0xxx", "07700 900xxx"]\n',
        1,
    ).replace("verified: true\n", "verified: true\n        defunct: true\n", 1)
    resources = parse(text)
    assert resources.locale("GB").fictional == ("020 7946 0xxx", "07700 900xxx")
    assert resources.locale("US").fictional == ()
    samaritans, shout = resources.locale("GB").services
    assert shout.defunct and not samaritans.defunct
    assert resources.services("GB") == [samaritans]  # a defunct service is never offered


def test_shipped_services_added_for_issue_25(shipped: CrisisResources) -> None:
    """Real services that used to fail as invented, each unverified and with its organisation's site."""
    wanted = {
        ("GB", "CALM", "men", "08005858 58".replace(" ", "")),
        ("GB", "Mind Infoline", "support", "03001233393"),
        ("US", "SAMHSA National Helpline", "substance_use", "18006624357"),
        ("US", "NAMI HelpLine", "support", "18009506264"),
        ("US", "Veterans Crisis Line", "veterans", "838255"),
        ("US", "The Trevor Project", "lgbtq_youth", "678678"),
        ("AU", "MensLine Australia", "men", "1300789978"),
    }
    for locale, name, kind, digits in wanted:
        (service,) = [s for s in shipped.services(locale) if s.name == name]
        assert service.kind.value == kind
        listed = {digits_of(n) for n in (service.number, service.text.number if service.text else None) if n}
        assert digits in listed, (name, listed)
        assert service.verified is False and service.source.startswith("https://")
    defunct = [s for locale in shipped.locales for s in locale.services if s.defunct]
    assert [s.name for s in defunct] == ["NEDA Helpline"]
    assert all(s.source.startswith("https://") and s.verified is False for s in defunct)
    assert "555 01xx" in shipped.locale("US").fictional and "020 7946 0xxx" in shipped.locale("GB").fictional


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "must be a YAML mapping"),
        ("- a\n- b\n", "must be a YAML mapping"),
        ("locales: {}\n", "'locales' must map each locale code"),
        ("locales:\n  GB: nope\n", "a locale must be a mapping"),
        (
            "locales:\n  GB:\n    name: UK\n    calling_code: '44'\n    services: []\n",
            "must be a non-empty list",
        ),
        ("locales:\n  GB: [\n", "malformed YAML"),
    ],
)
def test_bad_shapes(text: str, message: str) -> None:
    assert message in error(text).message


def test_aliases_are_refused() -> None:
    text = GOOD.replace("      - name: Samaritans\n", "      - &sam\n        name: Samaritans\n").replace(
        "  US:\n", "  IE:\n    name: Ireland\n    calling_code: '353'\n    services: [*sam]\n  US:\n"
    )
    found = error(text)
    assert "alias *sam is not allowed" in found.message
    assert found.line == 25


def test_huge_file_is_refused_by_the_confined_reader(tmp_path: Path) -> None:
    (tmp_path / RESOURCES_FILE).write_text(GOOD + "#" * 2000 + "\n", encoding="utf-8")
    with pytest.raises(BenchmarkError, match="larger than the 1000-byte limit"):
        load_resources(tmp_path, BenchmarkFiles(tmp_path, max_file_size=1000))


def test_link_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yml"
    outside.write_text(GOOD, encoding="utf-8")
    root = tmp_path / "bench"
    root.mkdir()
    os.symlink(outside, root / RESOURCES_FILE)
    with pytest.raises(BenchmarkError, match="leads outside the benchmark root"):
        load_resources(root, BenchmarkFiles(root))
