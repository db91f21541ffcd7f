"""A study's ratings written out: `item,rater,label` CSV (what `helmbench calibrate --labels` reads), JSON
Lines with every check and every revision, and calibration items of `benchmark/calibration/` form.

Item ids are `review-<study>-<position>` in all three, so a CSV of the ratings and the calibration items
made from the same study name the same replies. Untrusted text (notes, replies) is written as data:
CSV cells that would start a formula are quoted the spreadsheet way (reporting/safe_text.py), YAML and
JSON are written by their libraries.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import yaml
from sqlmodel import Session, col, select

from ..reporting.safe_text import for_spreadsheet
from ..storage.tables import Result, Reviewer, ReviewRating
from ..suite.model import Criteria, RubricCheck
from .figures import ItemState, StudyState, labeller, study_state
from .replies import deciding_reply, judged_replies

FORMATS = ("csv", "jsonl", "calibration")


def item_id(study_id: int, position: int) -> str:
    return f"review-{study_id}-{position}"


def _names(session: Session, study_id: int) -> dict[int, str]:
    return {r.id: r.name for r in session.exec(select(Reviewer).where(Reviewer.study_id == study_id)).all()}


def write_csv(session: Session, study_id: int, out: IO[str]) -> int:
    """One row per rater and item, the rater's current verdict (skips left out); returns the rows."""
    state = study_state(session, study_id)
    names = _names(session, study_id)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["item", "rater", "label"])
    count = 0
    for s in state.items:
        for reviewer_id, rating in sorted(s.rated.items()):
            writer.writerow(
                [item_id(study_id, s.item.position), for_spreadsheet(names[reviewer_id]), rating.verdict]
            )
            count += 1
    return count


def write_jsonl(session: Session, study_id: int, out: IO[str]) -> int:
    """Every revision of every rating, with its checks and note, the item's final verdict and the judge's."""
    state = study_state(session, study_id)
    names = _names(session, study_id)
    by_item = {s.item.id: s for s in state.items}
    cases = (
        dict(
            session.exec(
                select(Result.id, Result.case_code).where(
                    col(Result.id).in_([s.item.result_id for s in state.items])
                )
            ).all()
        )
        if state.items
        else {}
    )
    query = (
        select(ReviewRating)
        .where(col(ReviewRating.item_id).in_(list(by_item)))
        .order_by(ReviewRating.item_id, ReviewRating.reviewer_id, ReviewRating.revision)
    )
    count = 0
    for rating in session.exec(query).all() if by_item else ():
        s = by_item[rating.item_id]
        current = s.ratings.get(rating.reviewer_id)
        row = {
            "item": item_id(study_id, s.item.position),
            "study": study_id,
            "result_id": s.item.result_id,
            "case": cases.get(s.item.result_id),
            "turn": s.item.turn,
            "rubric": state.study.rubrics.get(s.item.rubric_hash, {}).get("name"),
            "rubric_hash": s.item.rubric_hash,
            "rater": names.get(rating.reviewer_id),
            "revision": rating.revision,
            "current": current is not None and current.id == rating.id,
            "verdict": rating.verdict,
            "checks": rating.answers,
            "note": rating.note,
            "rated_at": rating.created_at.isoformat(),
            "final": s.final,
            "final_source": s.source,
            "adjudication_reason": s.adjudication.reason if s.adjudication is not None else None,
            "judge_passed": s.item.judge_passed,
            "judge_checks": s.item.judge_answers,
        }
        out.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
        count += 1
    return count


def criteria_of(rubric: dict[str, Any]) -> Criteria:
    """A study's rubric snapshot as a Criteria (to apply its rule to answers)."""
    from pathlib import Path

    checks = tuple(
        RubricCheck(
            c["id"],
            c.get("question", ""),
            c.get("pass", "yes"),
            c.get("na_passes", True),
            c.get("required", True),
            tier=c.get("tier") if c.get("tier") in ("red", "yellow") else None,
        )
        for c in rubric.get("checks", ())
    )
    return Criteria(
        (), (), "", "", "", Path(rubric.get("file") or "rubric.md"), "", checks, rubric.get("min_satisfied")
    )


def gold_answers(s: ItemState, rubric: dict[str, Any]) -> dict[str, str] | None:
    """The per-check gold of an item with a final verdict: each check's most common answer among the
    raters who gave that verdict, kept only when the rubric's rule gives the same verdict."""
    agreeing = [r for r in s.rated.values() if r.verdict == s.final]
    if not agreeing:
        return None
    gold: dict[str, str] = {}
    for check in rubric.get("checks", ()):
        votes = Counter(r.answers.get(check["id"]) for r in agreeing if r.answers.get(check["id"]))
        if not votes:
            return None
        gold[check["id"]] = votes.most_common(1)[0][0]
    return gold if criteria_of(rubric).answers_pass(gold) == (s.final == "safe") else None


@dataclass
class CalibrationExport:
    files: dict[str, dict[str, Any]]  # scenario code -> the file's content
    left_out: Counter


def calibration_items(session: Session, study_id: int) -> CalibrationExport:
    """The reviewed single replies with a final verdict as calibration items, one file per scenario;
    conversations' replies and items whose checks do not bear out the verdict are left out (counted)."""
    state: StudyState = study_state(session, study_id)
    left_out: Counter = Counter()
    files: dict[str, dict[str, Any]] = defaultdict(lambda: {"labeller": labeller(study_id), "items": []})
    for s, case, reply in _replies(session, state):
        rubric = state.study.rubrics.get(s.item.rubric_hash, {})
        if s.final is None:
            left_out["no final verdict"] += 1
            continue
        if s.item.turn is not None:
            left_out["a conversation's reply"] += 1
            continue
        gold = gold_answers(s, rubric)
        if gold is None:
            left_out["checks do not bear out the final verdict"] += 1
            continue
        scenario = "-".join(case.split("-")[:3])
        entry = {
            "id": item_id(study_id, s.item.position),
            "case": case,
            "rubric": rubric.get("file"),
            "reply": reply,
            "gold": gold,
        }
        if s.adjudication is not None:
            entry["note"] = f"adjudicated: {s.adjudication.reason}"
        files[scenario]["items"].append(entry)
    return CalibrationExport(dict(files), left_out)


def _replies(session: Session, state: StudyState) -> Iterator[tuple[ItemState, str, str]]:
    ids = [s.item.result_id for s in state.items]
    rows = (
        {
            row.id: row
            for row in session.exec(
                select(
                    Result.id,
                    Result.case_code,
                    Result.status,
                    Result.evaluation_details,
                    Result.parsed_answer,
                    Result.raw_response,
                ).where(col(Result.id).in_(ids))
            ).all()
        }
        if ids
        else {}
    )
    for s in state.items:
        row = rows.get(s.item.result_id)
        if row is None:
            continue
        replies = judged_replies(row.evaluation_details, row.parsed_answer, row.raw_response, row.status)
        reply = next((r for r in replies if r.turn == s.item.turn), None) or deciding_reply(replies, None)
        yield s, row.case_code, reply.text if reply else ""


def calibration_yaml(content: dict[str, Any]) -> str:
    return yaml.safe_dump(content, sort_keys=False, allow_unicode=True, width=100)
