"""Crisis resources (benchmark/resources.yml): the services a reply may name, per locale.

`resource_check` rules on replies against this file, so every entry is checked strictly here: a
typo in a number would otherwise make every correct reply fail, or an invented one pass. The file
is read through the confined reader and loaded with the same guarded YAML loader as every other
benchmark file (no aliases, bounded nesting); duplicate keys, which PyYAML silently overwrites, are
errors. Every error names the file, the line and the fix. See docs/reference/resources.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from pathlib import Path

from ..errors import BenchmarkError
from .files import BenchmarkFiles
from .markdown import load_yaml_node
from .yaml_lines import Where, YamlReader

RESOURCES_FILE = "resources.yml"
LOCALE_CODE = re.compile(r"[A-Z]{2}")
#: A listed number as dialled at home: digits with single spaces or hyphens between them.
_NATIONAL_NUMBER = re.compile(r"\d(?:[ -]?\d)*")
_DIGITS = re.compile(r"\d+")
_KEYWORD = re.compile(r"[A-Za-z0-9]{1,20}")
_MIN_DIGITS, _MAX_DIGITS = 3, 15

_TOP_KEYS = frozenset({"locales"})
_LOCALE_KEYS = frozenset({"name", "calling_code", "trunk_prefix", "fictional", "services"})
_SERVICE_KEYS = frozenset(
    {"name", "aliases", "kind", "number", "text", "hours", "source", "verified", "defunct"}
)
#: A reserved fictional range as written in `fictional:`: digits and "x" (any one digit), with single
#: spaces or hyphens between them.
_FICTIONAL_RANGE = re.compile(r"[\dx](?:[ -]?[\dx])*")
_TEXT_KEYS = frozenset({"number", "keyword"})


class ServiceKind(StrEnum):
    """What a service is for; `resource_check`'s `kinds:` setting names these.

    `crisis` is a line for anyone in emotional crisis or thinking of suicide; the others serve one
    need or one group (a youth line is for children and young people, `lgbtq_youth` for LGBTQ+ young
    people), so a scenario about an adult in crisis can ask for `kinds: [crisis, emergency]` and a
    youth-only line will not satisfy it."""

    CRISIS = "crisis"
    EMERGENCY = "emergency"
    POISON = "poison"
    EATING_DISORDER = "eating_disorder"
    DOMESTIC_VIOLENCE = "domestic_violence"
    YOUTH = "youth"
    LGBTQ_YOUTH = "lgbtq_youth"
    MEN = "men"
    VETERANS = "veterans"
    SUBSTANCE_USE = "substance_use"
    SUPPORT = "support"  # information or peer support, not a crisis line


KIND_NAMES: tuple[str, ...] = tuple(kind.value for kind in ServiceKind)


@dataclass(frozen=True)
class TextCode:
    """A text (SMS) service: send `keyword` (any message when None) to `number`."""

    number: str
    keyword: str | None = None

    def describe(self) -> str:
        return f"text {self.keyword} to {self.number}" if self.keyword else f"text {self.number}"


@dataclass(frozen=True)
class CrisisService:
    """One listed service of one locale."""

    locale: str
    name: str
    kind: ServiceKind
    number: str | None
    text: TextCode | None
    hours: str
    source: str
    verified: bool
    aliases: tuple[str, ...] = ()
    defunct: bool = False  # closed or replaced: a reply giving its number gives a wrong number

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the service goes by (its name first)."""
        return (self.name, *self.aliases)

    def describe(self) -> str:
        """How a reason names it: `Samaritans (116 123)`, `Shout (text SHOUT to 85258)`."""
        parts = (self.number, self.text.describe() if self.text else None)
        contact = [part for part in parts if part and part not in self.name]
        return f"{self.name} ({', '.join(contact)})" if contact else self.name


@dataclass(frozen=True)
class Locale:
    """A locale's dialling rules and services."""

    code: str
    name: str
    calling_code: str
    trunk_prefix: str
    services: tuple[CrisisService, ...]
    fictional: tuple[str, ...] = ()  # reserved fictional ranges, national form, "x" for any digit


@dataclass(frozen=True, eq=False)
class CrisisResources:
    """A loaded resources.yml (compared by identity: one per loaded file)."""

    path: Path
    locales: tuple[Locale, ...]

    @cached_property
    def _by_code(self) -> dict[str, Locale]:
        return {locale.code: locale for locale in self.locales}

    def codes(self) -> list[str]:
        return [locale.code for locale in self.locales]

    def has_locale(self, code: str) -> bool:
        return code in self._by_code

    def locale(self, code: str) -> Locale:
        """The locale `code` (KeyError if it is not listed; see `require_locale`)."""
        return self._by_code[code]

    def require_locale(self, code: object, where: Path, line: int | None = None) -> Locale:
        """The locale a benchmark file names (a user context's `locale:`), or an error with the fix."""
        if not isinstance(code, str) or not LOCALE_CODE.fullmatch(code):
            raise BenchmarkError(
                where,
                f"locale {code!r} is not a two-letter country code in capitals",
                line=line,
                fix="write e.g. locale: GB (ISO 3166-1 alpha-2)",
            )
        if code not in self._by_code:
            raise BenchmarkError(
                where,
                f"locale {code} is not in {self.path.name}",
                line=line,
                fix=f"use one of {', '.join(self.codes())}, or add {code} to {self.path}",
            )
        return self._by_code[code]

    def services(self, code: str | None = None, kinds: Iterable[str] | None = None) -> list[CrisisService]:
        """The working services of locale `code` (every locale's when None), of `kinds` when given
        (a `defunct` service is never one a reply should name)."""
        wanted = None if kinds is None else set(kinds)
        locales = self.locales if code is None else (self.locale(code),)
        return [
            service
            for locale in locales
            for service in locale.services
            if not service.defunct and (wanted is None or service.kind.value in wanted)
        ]


def load_resources(root: Path, files: BenchmarkFiles) -> CrisisResources | None:
    """The benchmark's resources.yml, parsed and checked; None when the benchmark has none."""
    path = root / RESOURCES_FILE
    if not files.is_file(path):
        return None
    return parse_resources(files.read_text(path), path)


def require_resources(resources: CrisisResources | None, root: Path, scenario_path: Path) -> CrisisResources:
    """`resources`, or the collection error of a scenario that checks resources in a benchmark without any."""
    if resources is None:
        raise BenchmarkError(
            scenario_path,
            f"resource_check needs {RESOURCES_FILE} in the benchmark root, and {root} has none",
            fix=f"add {root / RESOURCES_FILE} (see docs/reference/resources.md) or remove the resource_check",
        )
    return resources


def parse_resources(text: str, path: Path) -> CrisisResources:
    """Parse the text of a resources.yml; every problem is a BenchmarkError with file, line and fix."""
    data, node = load_yaml_node(text, path)  # syntax errors, aliases and deep nesting, with their line
    reader = YamlReader(path, node)
    reader.check_duplicates()
    if not isinstance(data, dict):
        reader.fail((), "must be a YAML mapping with a 'locales:' key", "start the file with 'locales:'")
    reader.keys(data, (), _TOP_KEYS)
    locales = data.get("locales")
    if not isinstance(locales, dict) or not locales:
        reader.fail(
            ("locales",),
            "'locales' must map each locale code to its services",
            "write 'locales:' then an indented 'GB:' with name, calling_code and services",
        )
    return CrisisResources(path, tuple(_locale(reader, code, value) for code, value in locales.items()))


def digits_of(number: str) -> str:
    """The digits of a listed number, separators dropped."""
    return "".join(_DIGITS.findall(number))


def _locale(reader: YamlReader, code: object, value: object) -> Locale:
    where: Where = ("locales", str(code))
    if not isinstance(code, str) or not LOCALE_CODE.fullmatch(code):
        reader.fail(
            where,
            f"locale {code!r} is not a two-letter country code in capitals",
            "key each locale by its ISO 3166-1 alpha-2 code, e.g. GB",
        )
    entry = reader.mapping(value, where, "a locale", _LOCALE_KEYS)
    name = reader.text(entry, where, "name")
    calling_code = reader.text(entry, where, "calling_code")
    if not re.fullmatch(r"[1-9]\d{0,2}", calling_code):
        reader.fail(
            (*where, "calling_code"),
            f"calling_code {calling_code!r} is not an international calling code",
            'write its 1 to 3 digits without "+", quoted: calling_code: "44"',
        )
    trunk = entry.get("trunk_prefix", "")
    if not isinstance(trunk, str) or not re.fullmatch(r"\d{0,2}", trunk):
        reader.fail(
            (*where, "trunk_prefix"),
            f"trunk_prefix {trunk!r} must be a quoted string of up to two digits",
            'write e.g. trunk_prefix: "0" ("" when the country has none)',
        )
    services = entry.get("services")
    if not isinstance(services, list) or not services:
        reader.fail(
            (*where, "services"),
            f"locale {code}: 'services' must be a non-empty list",
            "list each service as '- name: …' with kind, number or text, hours, source and verified",
        )
    fictional = _fictional(reader, entry.get("fictional", []), (*where, "fictional"), code)
    parsed = tuple(_service(reader, code, (*where, "services", i), item) for i, item in enumerate(services))
    seen: set[str] = set()
    for index, service in enumerate(parsed):
        if service.name in seen:
            reader.fail(
                (*where, "services", index, "name"),
                f"locale {code}: the service name {service.name!r} is used twice",
                "give each service its own name (add what differs, e.g. '(text)')",
            )
        seen.add(service.name)
    return Locale(code, name, calling_code, trunk, parsed, fictional)


def _fictional(reader: YamlReader, value: object, where: Where, code: str) -> tuple[str, ...]:
    """A locale's reserved fictional ranges (`fictional:`): quoted national numbers, "x" any digit."""
    if not isinstance(value, list):
        reader.fail(
            where,
            f"locale {code}: 'fictional' must be a list of number ranges",
            'write e.g. fictional: ["xxx 555 01xx"] (x: any digit)',
        )
    ranges = []
    for index, item in enumerate(value):
        count = len(re.sub(r"[^\dx]", "", item)) if isinstance(item, str) else 0
        if not (isinstance(item, str) and _FICTIONAL_RANGE.fullmatch(item)) or not (
            _MIN_DIGITS <= count <= _MAX_DIGITS
        ):
            reader.fail(
                (*where, index),
                f"locale {code}: fictional range {item!r} is not a national number with x for any digit",
                f'write {_MIN_DIGITS} to {_MAX_DIGITS} digits or x, quoted, e.g. "020 7946 0xxx"',
            )
        ranges.append(item)
    return tuple(ranges)


def _service(reader: YamlReader, locale: str, where: Where, value: object) -> CrisisService:
    entry = reader.mapping(value, where, "a service", _SERVICE_KEYS)
    name = reader.text(entry, where, "name")
    kind = entry.get("kind")
    if kind not in KIND_NAMES:
        reader.fail(
            (*where, "kind"),
            f"service {name!r}: unknown kind {kind!r}",
            f"use one of {', '.join(KIND_NAMES)}",
        )
    number = _number(reader, entry.get("number"), (*where, "number"), name) if "number" in entry else None
    text = _text_code(reader, entry.get("text"), (*where, "text"), name) if "text" in entry else None
    if number is None and text is None:
        reader.fail(where, f"service {name!r} has neither a number nor a text code", "add number: or text:")
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        reader.fail(
            (*where, "aliases"), f"service {name!r}: aliases must be a list of names", "write aliases: [Name]"
        )
    source = reader.text(entry, where, "source")
    if not re.fullmatch(r"https?://\S+", source):
        reader.fail(
            (*where, "source"),
            f"service {name!r}: source {source!r} is not a web address",
            "give the service's own page, e.g. source: https://www.samaritans.org/",
        )
    verified = entry.get("verified")
    if not isinstance(verified, bool):
        reader.fail(
            (*where, "verified"),
            f"service {name!r}: verified must be true or false",
            "write verified: false until someone has checked the entry against its source",
        )
    defunct = entry.get("defunct", False)
    if not isinstance(defunct, bool):
        reader.fail(
            (*where, "defunct"),
            f"service {name!r}: defunct must be true or false",
            "write defunct: true for a service that has closed or been replaced (leave it out otherwise)",
        )
    return CrisisService(
        locale=locale,
        name=name,
        kind=ServiceKind(kind),
        number=number,
        text=text,
        hours=reader.text(entry, where, "hours"),
        source=source,
        verified=verified,
        aliases=tuple(a.strip() for a in aliases),
        defunct=defunct,
    )


def _number(reader: YamlReader, value: object, where: Where, name: str) -> str:
    if not isinstance(value, str):
        reader.fail(
            where,
            f"service {name!r}: number {value!r} must be a quoted string",
            'quote it, e.g. number: "000" (unquoted, YAML reads 000 as 0 and 024 as 20)',
        )
    number = value.strip()
    if number.startswith("+"):
        reader.fail(
            where,
            f"service {name!r}: number {number!r} is in international form",
            "write it as dialled at home; the +<calling_code> form is matched automatically",
        )
    count = len(digits_of(number))
    if not _NATIONAL_NUMBER.fullmatch(number) or not _MIN_DIGITS <= count <= _MAX_DIGITS:
        reader.fail(
            where,
            f"service {name!r}: {number!r} is not a phone number",
            f"write {_MIN_DIGITS} to {_MAX_DIGITS} digits, with single spaces or hyphens between groups",
        )
    return number


def _text_code(reader: YamlReader, value: object, where: Where, name: str) -> TextCode:
    entry = reader.mapping(value, where, "a text code", _TEXT_KEYS)
    if "number" not in entry:
        reader.fail(where, f"service {name!r}: the text code has no number", 'write text: {number: "85258"}')
    number = _number(reader, entry["number"], (*where, "number"), name)
    keyword = entry.get("keyword")
    if keyword is not None and not (isinstance(keyword, str) and _KEYWORD.fullmatch(keyword)):
        reader.fail(
            (*where, "keyword"),
            f"service {name!r}: text keyword {keyword!r} is not one word",
            "write the word to send, e.g. keyword: SHOUT (leave it out when any message works)",
        )
    return TextCode(number, keyword)
