"""The markdown layer of composition, byte for byte (issue 2, "Composition" and "Benchmark files")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.suite.markdown import (
    SafeYamlLoader,
    YamlRefused,
    heading_tag,
    normalize,
    read_text,
    split_consolidated,
    split_frontmatter,
    to_xml,
    yaml_load,
)

P = Path("bench/conditions.md")
FIX = "\n  fix: "


def error_of(call, *args) -> BenchmarkError:
    with pytest.raises(BenchmarkError) as info:
        call(*args)
    return info.value


# --- normalize / read_text ---------------------------------------------------------------------


def test_normalize_drops_a_leading_bom_and_turns_crlf_into_lf() -> None:
    assert normalize("\ufeff# C1\r\n\r\nbody\r\n") == "# C1\n\nbody\n"


def test_normalize_keeps_a_bom_that_is_not_leading_and_a_lone_cr() -> None:
    assert normalize("a\ufeffb\rc") == "a\ufeffb\rc"


def test_read_text_decodes_utf8_with_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "S1.md"
    path.write_bytes("\ufeff---\r\ncategory: ANSWER\r\n---\r\n## Café\r\n".encode("utf-8"))
    assert read_text(path) == "---\ncategory: ANSWER\n---\n## Café\n"


def test_read_text_rejects_invalid_utf8_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "S1.md"
    path.write_bytes(b"## Caf\xe9\n")
    error = error_of(read_text, path)
    assert error.describe().startswith(f"{path}: not valid UTF-8")
    assert FIX in error.describe()


def test_read_text_refuses_a_file_over_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "C1.md"
    path.write_bytes(b"x" * 11)
    assert read_text(path, max_size=11) == "x" * 11
    error = error_of(read_text, path, 10)
    assert error.describe() == (
        f"{path}: is larger than the 10-byte limit"
        f"{FIX}shorten it, or raise the limit with --helmbench-max-file-size"
    )


def test_read_text_never_reads_proc(tmp_path: Path) -> None:
    link = tmp_path / "conditions.md"
    link.symlink_to("/proc/self/environ")
    for path in (Path("/proc/self/environ"), link):
        assert error_of(read_text, path).message == "is a system file, not benchmark content"


def test_read_text_refuses_a_folder(tmp_path: Path) -> None:
    assert "is not a regular file" in error_of(read_text, tmp_path).message


# --- split_frontmatter -------------------------------------------------------------------------


def test_split_frontmatter_separates_metadata_and_body() -> None:
    doc = split_frontmatter("---\ncategory: ANSWER\nseverity: 2\n---\n\n## Your job\n\nHelp.\n", P)
    assert doc.meta == {"category": "ANSWER", "severity": 2}
    assert doc.body == "\n## Your job\n\nHelp.\n"
    assert doc.body_line == 5


def test_split_frontmatter_without_frontmatter_keeps_the_whole_text() -> None:
    doc = split_frontmatter("## Your job\n---\nx: 1\n---\n", P)
    assert doc.meta == {}
    assert doc.body == "## Your job\n---\nx: 1\n---\n"
    assert doc.body_line == 1


def test_split_frontmatter_empty_block_is_empty_metadata() -> None:
    doc = split_frontmatter("---\n---\nbody", P)
    assert (doc.meta, doc.body) == ({}, "body")


def test_split_frontmatter_unclosed_is_an_error_at_line_1() -> None:
    error = error_of(split_frontmatter, "---\ncategory: ANSWER\n\n## Your job\n", P)
    assert error.line == 1
    assert error.describe().startswith(f"{P}:1: frontmatter opened with '---' is never closed")
    assert FIX in error.describe()


@pytest.mark.parametrize("yaml_text", ["- a\n- b", "just a sentence", "42"])
def test_split_frontmatter_non_mapping_is_an_error(yaml_text: str) -> None:
    error = error_of(split_frontmatter, f"---\n{yaml_text}\n---\nbody\n", P)
    assert error.line == 2
    assert "must be a YAML mapping" in error.message
    assert error.describe().startswith(f"{P}:2: ")
    assert FIX in error.describe()


def test_split_frontmatter_malformed_yaml_names_the_file_line() -> None:
    text = "---\ncategory: ANSWER\nevaluation:\n  type: category_match\n   field: category\n---\nbody\n"
    error = error_of(split_frontmatter, text, P)
    assert error.line == 5
    assert error.describe().startswith(f"{P}:5: malformed YAML: ")
    assert FIX in error.describe()


def test_split_frontmatter_loads_yaml_safely() -> None:
    error = error_of(
        split_frontmatter, '---\na: !!python/object/apply:os.system ["echo pwned"]\n---\nbody', P
    )
    assert error.line == 2
    assert "malformed YAML" in error.message


@pytest.mark.parametrize(
    ("yaml_text", "line"),
    [
        ("a: &x [1, 2]\nb: *x", 3),
        ("base: &b {severity: 1}\nmerged:\n  <<: *b", 4),
        ('lol: &l ["lol", "lol"]\nbomb: [*l, *l, *l]', 3),
    ],
)
def test_yaml_aliases_are_refused_with_file_and_line(yaml_text: str, line: int) -> None:
    error = error_of(split_frontmatter, f"---\n{yaml_text}\n---\nbody\n", P)
    assert error.line == line
    assert error.describe().startswith(f"{P}:{line}: YAML refused: the alias *")
    assert "aliases are refused" in error.fix


def test_yaml_anchors_without_aliases_load() -> None:
    assert split_frontmatter("---\na: &x 1\n---\nbody", P).meta == {"a": 1}


@pytest.mark.parametrize("opener", ["[", "{a: ", "- ", "? "])
def test_deeply_nested_yaml_is_refused_not_a_crash(opener: str) -> None:
    # libyaml's own composer overflows the C stack (a segfault) on this; the guarded one refuses it
    error = error_of(split_frontmatter, "---\nx:\n  " + opener * 100_000 + "1\n---\nbody", P)
    assert error.line == 3
    assert "nested deeper than 64 levels" in error.message


@pytest.mark.parametrize("opener", ["[", "{a: ", "- ", "? "])
@pytest.mark.parametrize("levels", [61, 62, 63, 64])
def test_libyaml_s_nodes_are_refused_exactly_where_the_guarded_composer_refuses(opener: str, levels: int):
    # a few levels: libyaml composes them and the nodes' depth is checked (yaml_compose); the guarded
    # composer, which reads what libyaml may not, draws the line at the same depth (the root counts)
    closer = {"[": "]", "{a: ": "}"}.get(opener, "")
    text = "x:\n  " + opener * levels + "1" + closer * levels + "\n"

    def outcome(load) -> tuple[str, object]:
        try:
            return "loaded", load(text)
        except YamlRefused as exc:
            return "refused", exc.problem
        except yaml.YAMLError as exc:  # `? ? 1`: a mapping as a key, which no loader constructs
            return "error", type(exc).__name__

    found = outcome(yaml_load)
    assert found == outcome(lambda text: yaml.load(text, Loader=SafeYamlLoader))  # noqa: S506 - guarded
    assert (found[0] == "refused") == (levels >= 63), found


def test_metadata_block_after_an_h1_refuses_aliases_too() -> None:
    error = error_of(split_consolidated, "# C1\n---\na: &x 1\nb: *x\n---\nbody\n", P, "C")
    assert error.line == 4
    assert "YAML refused" in error.message


# --- split_consolidated ------------------------------------------------------------------------


def test_split_consolidated_reads_codes_titles_metadata_and_bodies() -> None:
    text = (
        "# C1\n\nFirst body.\n\n"
        "# C2: Terse tutor\n\n\n---\nseverity: 2\nstyle: terse\n---\n## System\n\nShort.\n"
    )
    first, second = split_consolidated(text, P, "C")
    assert (first.code, first.title, first.meta, first.body, first.line) == (
        "C1",
        "",
        {},
        "\nFirst body.\n",
        1,
    )
    assert (second.code, second.title, second.meta, second.line) == (
        "C2",
        "Terse tutor",
        {"severity": 2, "style": "terse"},
        5,
    )
    assert second.body == "## System\n\nShort.\n"


def test_split_consolidated_perturbation_prefix() -> None:
    (component,) = split_consolidated("# PT12: slang\nyo\n", P, "PT")
    assert (component.code, component.title, component.body) == ("PT12", "slang", "yo\n")


def test_metadata_block_only_directly_after_blank_lines() -> None:
    text = "# C1\nIntro line.\n---\nseverity: 2\n---\n"
    (component,) = split_consolidated(text, P, "C")
    assert component.meta == {}
    assert component.body == "Intro line.\n---\nseverity: 2\n---\n"


def test_metadata_block_directly_after_the_heading() -> None:
    (component,) = split_consolidated("# U1: Nigel\n---\nseverity: -3\n---\nI'm Nigel.", P, "U")
    assert (component.meta, component.body) == ({"severity": -3}, "I'm Nigel.")


def test_metadata_block_unclosed_is_an_error_with_its_line() -> None:
    error = error_of(split_consolidated, "# C1\n\nbody\n\n# C2\n\n---\nseverity: 1\n", P, "C")
    assert error.line == 7
    assert "never closed" in error.message
    assert FIX in error.describe()


def test_metadata_block_malformed_yaml_names_the_file_line() -> None:
    text = "# C1\nok\n\n# C2\n\n---\nseverity: 1\nstyle: [a\n---\nbody\n"
    error = error_of(split_consolidated, text, P, "C")
    assert error.describe().startswith(f"{P}:8: malformed YAML: ")
    assert FIX in error.describe()


def test_metadata_block_not_a_mapping_is_an_error() -> None:
    error = error_of(split_consolidated, "# C1\n---\n- severity\n---\nbody\n", P, "C")
    assert error.line == 3
    assert FIX in error.describe()


def test_h1_inside_fenced_code_is_not_a_component() -> None:
    text = "# C1\n```\n# not a heading\n```\n~~~~\n# C9 nor this\n~~~~\n# C2\nsecond\n"
    components = split_consolidated(text, P, "C")
    assert [c.code for c in components] == ["C1", "C2"]
    assert components[0].body == "```\n# not a heading\n```\n~~~~\n# C9 nor this\n~~~~"


@pytest.mark.parametrize(
    "heading",
    ["# Intro", "# C0", "# C01", "# c1", "# U1", "# C1 title without colon", "# C", "# ", "# PT1"],
)
def test_h1_without_a_valid_code_is_an_error_with_its_line(heading: str) -> None:
    error = error_of(split_consolidated, f"# C1\nbody\n\n{heading}\nmore\n", P, "C")
    assert error.line == 4
    assert error.describe().startswith(f"{P}:4: heading {heading.strip()!r} does not start with a valid code")
    assert "# C<n>" in error.fix and FIX in error.describe()


def test_text_before_the_first_h1_is_an_error() -> None:
    error = error_of(split_consolidated, "\nStray text.\n# C1\nbody\n", P, "C")
    assert "text before the first" in error.message
    assert error.line == 2
    assert FIX in error.describe()


def test_blank_lines_before_the_first_h1_are_fine() -> None:
    assert [c.code for c in split_consolidated("\n\n  \n# C1\nbody\n", P, "C")] == ["C1"]


@pytest.mark.parametrize("text", ["", "\n\n", "```\n# U1\n```\n"])
def test_no_component_is_an_error(text: str) -> None:
    error = error_of(split_consolidated, text, P, "U")
    assert (
        error.describe()
        == f"{P}: no component found\n  fix: add at least one '# U1' heading followed by its content"
    )


# --- heading_tag -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "tag"),
    [
        ("Your job", "your_job"),
        ("System instructions", "system_instructions"),
        ("User Input", "user_input"),
        ("  Hello,   World!! ", "hello_world"),
        ("a--b__c", "a_b_c"),
        ("_x_", "x"),
        ("Café au lait", "caf_au_lait"),
        ("naïve approach", "na_ve_approach"),
        ("İstanbul", "stanbul"),
        ("\u212a", "section_"),  # KELVIN SIGN lowercases to ASCII 'k' but is not ASCII
        ("²nd", "nd"),
        ("2nd step", "section_2nd_step"),
        ("42", "section_42"),
        ("", "section_"),
        ("!!!", "section_"),
        ("日本語", "section_"),
        ("Foo ##", "foo"),
        ("Foo #####   ", "foo"),
        ("##", "section_"),
        ("C# basics #", "c_basics"),
        ("MiXeD 123 Case", "mixed_123_case"),
    ],
)
def test_heading_tag(heading: str, tag: str) -> None:
    assert heading_tag(heading) == tag


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_heading_tag_is_always_a_clean_xml_name(heading: str) -> None:
    tag = heading_tag(heading)
    assert re.fullmatch(r"[a-z_][a-z0-9_]*", tag)
    assert "__" not in tag
    assert tag == "section_" or not tag.endswith("_")
    assert not tag[0].isdigit()


# --- to_xml ------------------------------------------------------------------------------------


def test_to_xml_design_note_section() -> None:
    body = "\n## Your job\n\nYou are an AI science tutor.\n"
    assert to_xml(body) == "<your_job>\nYou are an AI science tutor.\n</your_job>"


def test_to_xml_exact_bytes() -> None:
    body = (
        "\n\nPreface line.\n\n"
        "## System instructions\n\n\n  Be kind & <brief>.\n\n### Detail\nKeep H3.\n\n"
        "```md\n## Not a section\n# nor an H1\n```\n\n"
        "## 2nd part ##\n"
        "~~~\n## tilde fence\n~~~\n"
        "## Empty\n\n\n"
        "##NoSpace is text\n"
        "#### deep\n"
    )
    assert to_xml(body) == (
        "Preface line.\n\n"
        "<system_instructions>\nBe kind & <brief>.\n\n### Detail\nKeep H3.\n\n"
        "```md\n## Not a section\n# nor an H1\n```\n</system_instructions>\n\n"
        "<section_2nd_part>\n~~~\n## tilde fence\n~~~\n</section_2nd_part>\n\n"
        "<empty>\n##NoSpace is text\n#### deep\n</empty>"
    )


def test_to_xml_empty_section_and_no_preface() -> None:
    assert to_xml("## A\n## B\nb") == "<a>\n\n</a>\n\n<b>\nb\n</b>"


def test_to_xml_without_sections_is_the_stripped_text() -> None:
    assert to_xml("\n\n  Just text.\n### H3 stays\n\n") == "Just text.\n### H3 stays"


def test_to_xml_empty_body_is_empty() -> None:
    assert to_xml("\n  \n") == ""


def test_to_xml_indented_fence_up_to_three_spaces_hides_sections() -> None:
    assert to_xml("## A\n   ```\n## in code\n   ```\n") == "<a>\n```\n## in code\n   ```\n</a>"


def test_to_xml_unclosed_fence_hides_the_rest() -> None:
    assert to_xml("## A\n```\n## B\n") == "<a>\n```\n## B\n</a>"


def test_to_xml_does_not_escape_content() -> None:
    assert to_xml('## Q\n<tag attr="1"> & </q> ]]>') == '<q>\n<tag attr="1"> & </q> ]]>\n</q>'


def test_to_xml_same_heading_twice_gives_two_sections() -> None:
    assert to_xml("## Step\none\n## Step\ntwo") == "<step>\none\n</step>\n\n<step>\ntwo\n</step>"


@pytest.mark.parametrize(
    "closer",
    ["```python", "```` x", "``", "~~~", "   ```\tjs", "    ```"],
    ids=["info-string", "longer-with-info", "shorter", "other-char", "indented-with-info", "indented-4"],
)
def test_a_fence_closes_only_with_the_same_character_as_long_and_no_info_string(closer: str) -> None:
    body = f"## A\n```\n{closer}\n## still code\n```\n## B\nb"
    assert to_xml(body) == f"<a>\n```\n{closer}\n## still code\n```\n</a>\n\n<b>\nb\n</b>"


@pytest.mark.parametrize("closer", ["```", "````", "```  ", "   ````\t", "~~~~~"])
def test_a_fence_closes_with_a_bare_fence_at_least_as_long(closer: str) -> None:
    opener = "~~~~ txt" if closer.startswith("~") else "``` md"
    assert to_xml(f"## A\n{opener}\n## in code\n{closer}\n## B\nb") == (
        f"<a>\n{opener}\n## in code\n{closer.rstrip()}\n</a>\n\n<b>\nb\n</b>"
    )


def test_a_backtick_line_whose_info_string_has_a_backtick_opens_no_fence() -> None:
    assert to_xml("## A\n``` a`b\n## B\nb") == "<a>\n``` a`b\n</a>\n\n<b>\nb\n</b>"


def test_an_h1_after_a_closer_with_an_info_string_is_still_code() -> None:
    text = "# C1\n```\n```js\n# C9 still code\n```\n# C2\nsecond\n"
    assert [c.code for c in split_consolidated(text, P, "C")] == ["C1", "C2"]


# --- property tests ----------------------------------------------------------------------------

_CHARS = st.characters(blacklist_categories=("Cs", "Cc"))


def _plain_line(line: str) -> bool:
    """A content line that is not markup this layer interprets (H1/H2, fences, YAML fences)."""
    start = line.lstrip(" ")
    return not start.startswith(("#", "`", "~")) and line.rstrip() not in ("---", "...") and "---" not in line


plain_lines = st.lists(st.text(_CHARS, max_size=30).filter(_plain_line), max_size=4)
headings = st.text(_CHARS, max_size=20)
fenced = st.sampled_from(
    [
        "",
        "```\n## fenced heading\n# fenced h1\n```",
        "~~~~ txt\n# C7 fake\n~~~~",
        "### Kept H3",
        # CommonMark: a line with an info string, a shorter run or the other character closes nothing
        "```\n```js\n## still code\n# C8 still code\n``\n~~~\n## still code\n````",
    ]
)


@st.composite
def bodies(draw) -> tuple[str, str]:
    """A component body made of H2 sections, and the prompt text the contract says it composes to."""
    preface = draw(plain_lines)
    lines = list(preface)
    parts = []
    lead = "\n".join(preface).strip()
    if lead:
        parts.append(lead)
    for _ in range(draw(st.integers(0, 4))):
        heading = draw(headings)
        content = [*draw(plain_lines), draw(fenced), *draw(plain_lines)]
        lines += [f"## {heading}", *content]
        tag = heading_tag(heading)
        parts.append(f"<{tag}>\n" + "\n".join(content).strip() + f"\n</{tag}>")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"])), "\n\n".join(parts)


metas = st.dictionaries(
    st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8),
    st.one_of(st.integers(-10, 10), st.text(_CHARS, max_size=12), st.lists(st.integers(), max_size=3)),
    max_size=3,
)


def _yaml_block(meta: dict) -> str:
    return "---\n" + (yaml.safe_dump(meta, allow_unicode=True) if meta else "") + "---\n"


@st.composite
def component_sets(draw) -> list[tuple[str, str, dict, str, str]]:
    """(code, title, meta, body, expected text) for 1-4 components."""
    found = []
    for number in draw(st.lists(st.integers(1, 50), min_size=1, max_size=3, unique=True)):
        body, expected = draw(bodies())
        title = draw(st.text(_CHARS, max_size=15))
        found.append((f"C{number}", title, draw(metas), body, expected))
    return found


def _consolidated(components, blank_lines: int) -> str:
    chunks = []
    for code, title, meta, body, _ in components:
        head = f"# {code}: {title}\n" if title.strip() else f"# {code}\n"
        block = "\n" * blank_lines + _yaml_block(meta) if meta else ""
        chunks.append(head + block + body + ("" if body.endswith("\n") else "\n"))
    return "\n".join(chunks)


def _individual(meta: dict, body: str) -> str:
    return (_yaml_block(meta) if meta else "") + body


@pytest.mark.slow
@settings(max_examples=75, deadline=None)
@given(component_sets(), st.integers(0, 2))
def test_property_consolidated_and_individual_forms_compose_identically(components, blank_lines: int) -> None:
    parsed = split_consolidated(_consolidated(components, blank_lines), P, "C")
    assert [c.code for c in parsed] == [c[0] for c in components]
    for raw, (code, title, meta, body, expected) in zip(parsed, components, strict=True):
        doc = split_frontmatter(_individual(meta, body), Path(f"conditions/{code}.md"))
        assert to_xml(raw.body) == to_xml(doc.body) == expected
        assert raw.meta == doc.meta == meta
        assert raw.title == title.strip()


@pytest.mark.slow
@settings(max_examples=75, deadline=None)
@given(component_sets(), metas)
def test_property_frontmatter_never_reaches_the_text(components, meta: dict) -> None:
    meta = {"marker_key_zz": "marker-value", **meta}
    _, _, _, body, expected = components[0]
    text = to_xml(split_frontmatter(_individual(meta, body), P).body)
    assert text == expected
    assert "---" not in text and "marker_key_zz" not in text
    with_meta = [(code, title, {**m, "marker_key_zz": 1}, b, e) for code, title, m, b, e in components]
    for raw in split_consolidated(_consolidated(with_meta, 1), P, "C"):
        composed = to_xml(raw.body)
        assert "---" not in composed and "marker_key_zz" not in composed


@pytest.mark.slow
@settings(max_examples=75, deadline=None)
@given(component_sets(), st.booleans())
def test_property_crlf_and_lf_files_compose_identically(components, bom: bool) -> None:
    lf = _consolidated(components, 1)
    crlf = ("\ufeff" if bom else "") + lf.replace("\n", "\r\n")
    lf_parts = split_consolidated(normalize(lf), P, "C")
    crlf_parts = split_consolidated(normalize(crlf), P, "C")
    assert [(c.code, c.meta, to_xml(c.body), c.line) for c in lf_parts] == [
        (c.code, c.meta, to_xml(c.body), c.line) for c in crlf_parts
    ]
    _, _, meta, body, expected = components[0]
    single = _individual(meta, body)
    single_crlf = ("\ufeff" if bom else "") + single.replace("\n", "\r\n")
    assert (
        to_xml(split_frontmatter(normalize(single_crlf), P).body)
        == to_xml(split_frontmatter(normalize(single), P).body)
        == expected
    )
