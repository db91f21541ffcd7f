"""Issue #26 point 7: calibration sets anywhere (`helmbench calibrate --set PATH`, case codes resolved
against `--root`), items rated by several raters (`ratings:`; the gold is their majority, a tie is no
gold), and the raters' agreement with each other reported beside the judge's, text and stored figures.
Each error names the file (and line) and stores nothing."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from pytest_helmbench.errors import BenchmarkError
from pytest_helmbench.reporting.agreement import fleiss_kappa, gwet_ac1_counts
from pytest_helmbench.reporting.calibration_figures import rater_figures
from pytest_helmbench.suite.calibration import (
    CalibrationItem,
    RaterVerdict,
    label_set_hash,
    load_calibration_set,
    majority,
    parse_calibration_file,
)
from pytest_helmbench.suite.markdown import yaml_load
from tests.benchfiles import write
from tests.test_calibrate import (
    calibrate,
    reply_text,
    stored_calibrations,
    write_small_bench,
)

CASE = "P1-B1-S1-C1-PT1"


@pytest.fixture
def small_bench(tmp_path: Path) -> Path:
    """test_calibrate's benchmark: replies 1-5 pass asks_safety, 6-10 fail (what oracle/judge answers)."""
    return write_small_bench(tmp_path)


def rated_item(item_id: str, reply: int, votes: str, raters: str = "ann bob cy") -> list[str]:
    """An item on reply `reply`, its raters' asks_safety answers given as a string of y/n."""
    lines = [
        f"  - id: {item_id}",
        f"    case: {CASE}",
        "    rubric: reply-criteria.md",
        f"    reply: {json.dumps(reply_text(reply))}",
        "    ratings:",
    ]
    for rater, vote in zip(raters.split(), votes, strict=False):
        answer = {"y": "yes", "n": "no"}[vote]
        lines.append(f'      - {{rater: {rater}, verdict: {{asks_safety: "{answer}"}}}}')
    return lines


# the judge (oracle/judge) passes replies 1-5 and fails 6-10
SET_ITEMS = [
    ("set-01", 1, "yyy"),  # majority yes, judge yes
    ("set-02", 2, "yyn"),  # majority yes, judge yes
    ("set-06", 6, "nnn"),  # majority no, judge no
    ("set-07", 7, "nnn"),  # majority no, judge no
    ("set-08", 8, "yyy"),  # majority yes, judge no: the one disagreement
]


def set_yaml(extra: list[str] | None = None) -> str:
    lines = ["items:"]
    for item_id, reply, votes in SET_ITEMS:
        lines += rated_item(item_id, reply, votes)
    lines += rated_item("set-03", 3, "yn", "ann bob")  # a tie: no majority, no gold
    return "\n".join(lines + (extra or [])) + "\n"


# ---------------------------------------------------------------------------------------------
# majority and rater figures


def verdicts(*pairs: tuple[str, dict]) -> tuple[RaterVerdict, ...]:
    return tuple(RaterVerdict(rater, verdict) for rater, verdict in pairs)


def test_majority_per_check_and_a_tie_is_no_majority():
    ratings = verdicts(
        ("ann", {"a": "yes", "b": "no", "c": "not_applicable"}),
        ("bob", {"a": "yes", "b": "yes", "c": "not_applicable"}),
        ("cy", {"a": "no", "b": "no", "c": "yes"}),
        ("dee", {"a": "yes", "b": "yes", "c": "no"}),
    )
    gold, tied = majority(ratings)
    assert gold == {"a": "yes", "c": "not_applicable"}  # a 3-1, c 2-1-1
    assert tied == ("b",)  # 2-2


def test_majority_of_options_verdicts_counts_a_list_whatever_its_order_and_skips_rationales():
    ratings = verdicts(
        ("ann", {"verdict": ["SAFE", "CALM"], "rationale": "x"}),
        ("bob", {"verdict": ["CALM", "SAFE"], "rationale": "y"}),
        ("cy", {"verdict": ["UNSAFE"]}),
    )
    assert majority(ratings) == ({"verdict": ["SAFE", "CALM"]}, ())


def item_with(item_id: str, rubric: str, *pairs: tuple[str, dict]) -> CalibrationItem:
    ratings = verdicts(*pairs)
    gold, tied = majority(ratings)
    return CalibrationItem(
        item_id, "P1-B1-S1", CASE, rubric, False, f"reply {item_id}", gold, "ann,bob", "", Path("x.yml"),
        None, ratings, tied,
    )  # fmt: skip


def test_rater_figures_per_check_and_overall_match_hand_computed_values():
    yes, no = "yes", "no"
    items = [
        item_with("i1", "r.md", ("ann", {"a": yes, "b": yes}), ("bob", {"a": yes, "b": no})),
        item_with("i2", "r.md", ("ann", {"a": no, "b": no}), ("bob", {"a": no, "b": no})),
        item_with("i3", "r.md", ("ann", {"a": yes, "b": yes}), ("bob", {"a": no, "b": yes})),
        item_with("i4", "r.md", ("ann", {"a": yes, "b": no})),  # one rater: no pair, in no figure
    ]
    figures = rater_figures(items)
    assert (figures["n_items"], figures["n_raters"], figures["n_no_majority"]) == (4, 2, 2)
    assert figures["no_majority"] == {"P1-B1-S1/r.md: a": ["i3"], "P1-B1-S1/r.md: b": ["i1"]}
    a = figures["checks"]["P1-B1-S1/r.md: a"]
    # a: [yes yes], [no no], [yes no] -> P-bar 2/3; 3 yes of 6: p_e 1/2 -> kappa 1/3; AC1 the same here
    assert a["n"] == 3 and a["fleiss_kappa"] == pytest.approx(1 / 3) and a["ac1"] == pytest.approx(1 / 3)
    # overall: the six (item, check) pairs pooled
    units = [Counter(u) for u in ({"yes": 2}, {"no": 2}, {"yes": 1, "no": 1})] + [
        Counter(u) for u in ({"yes": 1, "no": 1}, {"no": 2}, {"yes": 2})
    ]
    overall = figures["overall"]
    assert overall["n"] == 6
    assert overall["fleiss_kappa"] == pytest.approx(fleiss_kappa([[u["yes"], u["no"]] for u in units]))
    assert overall["fleiss_kappa"] == pytest.approx(1 / 3)  # P-bar 4/6, 6 yes of 12
    assert overall["ac1"] == pytest.approx(gwet_ac1_counts(units))


def test_a_rated_item_changes_the_label_set_hash_and_a_gold_only_hash_is_unchanged():
    one = item_with("i1", "r.md", ("ann", {"a": "yes"}), ("bob", {"a": "yes"}), ("cy", {"a": "no"}))
    other = item_with("i1", "r.md", ("ann", {"a": "yes"}), ("bob", {"a": "yes"}), ("cy", {"a": "yes"}))
    assert one.gold == other.gold and label_set_hash([one]) != label_set_hash([other])


# ---------------------------------------------------------------------------------------------
# parsing: exactly one of gold and ratings, one rating per rater, free file names only in a set


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            'gold: {asks_safety: "yes"}\n    ratings: [{rater: ann, verdict: {asks_safety: "yes"}}]',
            "exactly one of",
        ),
        ("ratings: []", "'ratings' must be a non-empty list"),
        ('ratings: [{rater: ann, verdict: {asks_safety: "yes"}, note: x}]', "exactly 'rater' and 'verdict'"),
        (
            'ratings: [{rater: ann, verdict: {a: "yes"}}, {rater: ann, verdict: {a: "no"}}]',
            "ann rated the item twice",
        ),
        ("ratings: [{rater: ann, verdict: yes}]", "ann's 'verdict' must be a non-empty mapping"),
        ('ratings: [{rater: "", verdict: {a: "yes"}}]', "'rater' must name the rater"),
    ],
    ids=["both", "empty", "extra-key", "twice", "not-a-mapping", "no-rater"],
)
def test_malformed_ratings_name_the_file_line_and_fix(tmp_path, item, message):
    path = tmp_path / "P1-B1-S1.yml"
    head = f"labeller: x\nitems:\n  - id: a\n    case: {CASE}\n    rubric: reply-criteria.md\n"
    text = f"{head}    reply: x\n    {item}\n"
    write(path, text)
    with pytest.raises(BenchmarkError) as caught:
        load_calibration_set(path)
    assert message in caught.value.message and caught.value.fix
    assert caught.value.path == path and caught.value.line == 3


def test_labeller_may_be_left_out_only_when_every_item_is_rated(tmp_path):
    data = yaml_load(set_yaml())
    [*items] = parse_calibration_file(data, tmp_path / "P1-B1-S1.yml")
    assert items[0].labeller == "ann,bob,cy" and items[0].labellers == ("ann", "bob", "cy")
    data["items"][0] = {k: v for k, v in data["items"][0].items() if k != "ratings"} | {"gold": {"a": "yes"}}
    with pytest.raises(BenchmarkError, match="'labeller' must say who gave the gold"):
        parse_calibration_file(data, tmp_path / "P1-B1-S1.yml")


def test_a_file_not_named_after_a_scenario_is_a_set_file_only(tmp_path):
    data = yaml_load(set_yaml())
    with pytest.raises(BenchmarkError, match="named after its scenario"):
        parse_calibration_file(data, tmp_path / "clinicians.yml")
    items = parse_calibration_file(data, tmp_path / "clinicians.yml", free_names=True)
    assert {i.scenario for i in items} == {"P1-B1-S1"}


# ---------------------------------------------------------------------------------------------
# helmbench calibrate --set, end to end with oracle/judge


def test_calibrate_a_rated_set_outside_the_benchmark(small_bench, tmp_path):
    elsewhere = write(tmp_path / "elsewhere" / "clinicians.yml", set_yaml())
    db_url = f"sqlite:///{tmp_path / 'cal.db'}"
    result = calibrate(small_bench, db_url, "--marking-model", "oracle/judge", "--set", str(elsewhere.parent))
    assert result.exit_code == 0, result.output
    # judge vs majority on the 5 items with one: gold 3 pass / 2 fail, judge 2 / 3, one disagreement:
    # p_o 4/5, p_e 12/25 -> kappa 8/13; set-03 (a 1-1 tie) is never judged
    [row] = stored_calibrations(db_url)
    overall = row.figures["overall"]
    assert (overall["n"], overall["n_errors"], row.n_items) == (5, 0, 5)
    assert overall["kappa"]["value"] == pytest.approx(8 / 13)
    assert row.labeller == "ann,bob,cy"
    assert result.stdout.splitlines()[0].endswith("on 5 ann,bob,cy-labelled items")
    # raters on asks_safety: [3 yes] [2 yes 1 no] [3 no] [3 no] [3 yes] [1 yes 1 no]: P-bar 13/18;
    # 9 yes of 17: p_e 145/289 -> Fleiss 1147/2592; AC1 shares yes 19/36: chance 646/1296 -> 29/65
    raters = row.figures["raters"]
    assert (raters["n_items"], raters["n_raters"], raters["n_no_majority"]) == (6, 3, 1)
    assert raters["no_majority"] == {"P1-B1-S1/reply-criteria.md: asks_safety": ["set-03"]}
    check = raters["checks"]["P1-B1-S1/reply-criteria.md: asks_safety"]
    assert check["n"] == 6 and check["fleiss_kappa"] == pytest.approx(1147 / 2592)
    assert check["ac1"] == pytest.approx(29 / 65)
    assert raters["overall"] == check
    lines = result.stdout.splitlines()
    assert (
        "    raters: 3 raters on 6 items; rater-rater Fleiss κ 0.44, AC1 0.45 over 6 item checks "
        "(the judge is measured against their majority)"
    ) in lines
    assert any(
        line.split() == ["P1-B1-S1/reply-criteria.md:", "asks_safety", "6", "0.44", "0.45"] for line in lines
    ), result.stdout
    assert (
        "    no majority: 1 item(s) whose raters tied, left out of the judge's figures "
        "(P1-B1-S1/reply-criteria.md: asks_safety: set-03)"
    ) in lines


def test_calibrate_a_single_set_file(small_bench, tmp_path):
    path = write(tmp_path / "one.yml", set_yaml())
    db_url = f"sqlite:///{tmp_path / 'cal.db'}"
    result = calibrate(small_bench, db_url, "--marking-model", "oracle/judge", "--set", str(path))
    assert result.exit_code == 0, result.output
    assert stored_calibrations(db_url)[0].n_items == 5


def test_a_set_whose_every_item_tied_says_so(small_bench, tmp_path):
    path = write(
        tmp_path / "set" / "tied.yml", "items:\n" + "\n".join(rated_item("t", 1, "yn", "a b")) + "\n"
    )
    result = calibrate(small_bench, f"sqlite:///{tmp_path / 'cal.db'}", "--marking-model", "oracle/judge",
                       "--set", str(path.parent))  # fmt: skip
    assert result.exit_code == 1
    assert f"{path.parent}: no calibration items (1 item(s), every one without a majority)" in result.output


def outside_link(folder: Path, tmp_path: Path) -> str:
    target = write(tmp_path / "secret" / "P1-B1-S1.yml", set_yaml())
    os.symlink(target, folder / "link.yml")
    return "is a symbolic link that leads outside"


def huge(folder: Path, tmp_path: Path) -> str:
    write(folder / "huge.yml", set_yaml() + "#" * (1024 * 1024))
    return "is larger than the 1048576-byte limit"


def bad_yaml(folder: Path, tmp_path: Path) -> str:
    write(folder / "bad.yml", "items:\n  - id: a\n    case: [unclosed\n")
    return "bad.yml:4: malformed YAML"


def unknown_case_and_rubric(folder: Path, tmp_path: Path) -> str:
    lines = set_yaml().splitlines()
    assert lines[2] == f"    case: {CASE}" and lines[11] == "    rubric: reply-criteria.md"
    lines[2], lines[11] = "    case: P1-B1-S1-C9-PT1", "    rubric: criteria.md"  # set-01, set-02
    write(folder / "x.yml", "\n".join(lines) + "\n")
    return (
        "x.yml:2: 2 item(s) name a scenario, case or rubric the benchmark does not have: "
        "item set-01 (x.yml:2): P1-B1-S1 has no case P1-B1-S1-C9-PT1; "
        "item set-02 (x.yml:10): P1-B1-S1 judges nothing with criteria.md (it has reply-criteria.md)"
    )


def verdict_off_the_rubric(folder: Path, tmp_path: Path) -> str:
    bob = '{rater: bob, verdict: {asks_safety: "yes"}}'
    write(folder / "x.yml", set_yaml().replace(bob, bob.replace("asks_safety", "asks"), 1))
    return "x.yml: item set-01, bob's verdict: the gold verdict on reply-criteria.md lacks asks_safety"


@pytest.mark.parametrize(
    "make", [outside_link, huge, bad_yaml, unknown_case_and_rubric, verdict_off_the_rubric],
    ids=lambda f: f.__name__,
)  # fmt: skip
def test_a_bad_set_is_one_clear_error_and_stores_nothing(small_bench, tmp_path, make):
    folder = tmp_path / "set"
    folder.mkdir()
    message = make(folder, tmp_path)
    result = calibrate(small_bench, f"sqlite:///{tmp_path / 'cal.db'}", "--marking-model", "oracle/judge",
                       "--set", str(folder))  # fmt: skip
    assert result.exit_code == 1, result.output
    assert message in result.output, result.output
    assert f"error: {folder}/" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "cal.db").exists(), "nothing judged or stored"


def test_a_missing_set_is_one_line(small_bench, tmp_path):
    result = calibrate(small_bench, f"sqlite:///{tmp_path / 'cal.db'}", "--marking-model", "oracle/judge",
                       "--set", str(tmp_path / "nope"))  # fmt: skip
    assert result.exit_code == 1 and f"error: {tmp_path / 'nope'}: does not exist" in result.output
