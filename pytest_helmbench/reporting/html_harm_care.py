"""The report's "Harm and care" section: scoring version 3's figures by behaviour, by risk level and by
difficulty (the severity bands of perturbations, user contexts and conditions), for every series.

Severity is reported as difficulty, never used as a discount: a band's figures say how a model fares on
the harder wordings, settings and users, beside its figures on the easier ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .harm_care import HarmCare, by
from .html_tables import e, sortable_table
from .judge_error import NOT_INCLUDED, judge_corrected_figures, series_calibration
from .series import Series

#: The breakdowns shown, with their headings.
BREAKDOWNS = (
    ("behaviour", "Behaviour"),
    ("risk", "Risk level"),
    ("perturbation_severity", "Perturbation difficulty"),
    ("user_context_severity", "User-context difficulty"),
    ("condition_severity", "Condition difficulty"),
    ("layout", "Layout"),
)


def _cells(figures: HarmCare | None) -> str:
    if figures is None:
        return '<td class="num">&ndash;</td><td class="num">&ndash;</td>'
    harm, care = figures.harm_rate, figures.care_score
    harm_text = "n/a" if harm is None else f"{100 * harm.value:.1f}%"
    care_text = "n/a" if care is None else f"{care.value:.1f}"
    title = f"{figures.n_scored} scored replies; no harm verdict for {figures.n_harm_unknown}"
    return (
        f'<td class="num harm" title="{e(title)}">{e(harm_text)}</td>'
        f'<td class="num care" title="{e(title)}">{e(care_text)}</td>'
    )


def breakdown_table(series: list[Series], key: str, heading: str) -> str:
    """Rows: the groups; per series two columns, harm rate and care score."""
    found = [by(s.results, key) for s in series]
    groups: list[str] = []
    for figures in found:
        groups += [name for name in figures if name not in groups]
    head = [heading] + [f"{s.label}: {what}" for s in series for what in ("harm rate", "care score")]
    rows = [
        f'<tr><th scope="row">{e(group)}</th>' + "".join(_cells(f.get(group)) for f in found) + "</tr>"
        for group in groups
    ]
    return sortable_table(f"harm-care-{key.replace('_', '-')}", head, rows)


def judge_error_lines(series: list[Series], calibrations: Mapping[int, Any]) -> str:
    """Per series: the harm rate and care score corrected for the judge's measured error, or that the
    figures include no judge error (judge_error.py)."""
    items = []
    for one in series:
        calibration = series_calibration(one.run_ids, calibrations)
        found = judge_corrected_figures(one.results, calibration.figures if calibration else None)
        if found is None or calibration is None:
            items.append(
                f"<li>{e(one.label)}: {NOT_INCLUDED} (no calibration of its judge covers its runs)</li>"
            )
            continue
        harm, care = found["harm_rate"], found["care_score"]
        parts = [
            f"harm rate {_with_interval(harm, 100.0, '%')}",
            f"care score {_with_interval(care, 1.0, '')}",
        ]
        source = f"calibration {calibration.id}, {calibration.labeller}-labelled, {calibration.n_items} items"
        items.append(
            f"<li>{e(one.label)}: corrected for judge error: {e('; '.join(parts))} ({e(source)})</li>"
        )
    return '<ul class="judge-error">' + "".join(items) + "</ul>"


def _with_interval(figure: Any, scale: float, unit: str) -> str:
    if figure is None:
        return "n/a"
    text = f"{scale * figure.value:.1f}{unit}"
    if figure.ci_low is not None and figure.ci_high is not None:
        text += f" [95% CI {scale * figure.ci_low:.1f}{unit}-{scale * figure.ci_high:.1f}{unit}]"
    return text


def harm_care_section(series: list[Series], calibrations: Mapping[int, Any] | None = None) -> str:
    """Every breakdown table, under one heading, after the judge-error line of each series."""
    corrected = judge_error_lines(series, calibrations or {})
    tables = "\n".join(
        f"<h3>{e(heading)}</h3>\n{breakdown_table(series, key, heading)}" for key, heading in BREAKDOWNS
    )
    return (
        '<section id="harm-care">\n<h2>Harm and care</h2>\n<p class="explain">Harm rate: share of replies '
        "with any harm (a harm check answered yes, a wrong crisis number, a label the scenario marks as "
        "harmful); lower is better. Care score: care points earned over care points possible, 0&ndash;100. "
        "Each scenario's replies are averaged first, then scenarios are weighed as benchmark.yml says. "
        "Difficulty bands group the severity of the wording, the user context and the condition: severity "
        f"is reported, never a discount. These figures count what the judge said; where a calibration of "
        f"the judge covers the run, the line below corrects them for its measured sensitivity and "
        f"specificity.</p>\n{corrected}\n{tables}\n</section>"
    )
