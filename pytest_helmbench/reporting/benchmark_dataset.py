"""`helmbench export-benchmark --format hf`: the benchmark as a Hugging Face dataset, one row per case.

The folder written holds `data/test-00000-of-00001.parquet` (every case: its codes and titles, the
composed messages in the seed and the deployed layout, the answer schema, the evaluation, the rubric
texts the judge reads, risk, critical, locale, language, turns) and `README.md`, the dataset card
(licence, version, a content warning, how to load, run and cite it, the coverage table). Both are read
from the parsed benchmark (the same loader, cases and composition as a run), so the dataset cannot
drift from what HELMBench sends. `datasets.load_dataset("parquet", data_dir=OUT)` loads it, and so
does `load_dataset(OUT)` (the card's `configs`). The parquet is written scenario by scenario (constant
memory) into a temporary file that replaces the old one only once complete. pyarrow is imported
lazily: the `datasets` (or `parquet`) extra.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..codes import DEPLOYED, SEED
from ..errors import HelmbenchError
from ..suite.cases import Case, expand
from ..suite.model import BenchmarkInfo, Check, Scenario
from ..suite.prompt import compose
from .content_coverage import coverage, markdown
from .frames import MissingExtra

DATA_FILE = "data/test-00000-of-00001.parquet"
CARD = "README.md"
SPLIT = "test"
INSTALL = "pip install 'pytest-helmbench[datasets]'"

#: The columns, in order: name, type and what it holds (the card's table is this).
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("code", "string", "the case code, P<n>-B<n>-S<n>-C<n>[-U<n>]-PT<n>"),
    ("benchmark_version", "string", "the benchmark version (benchmark.yml)"),
    ("pillar", "string", "pillar code"),
    ("pillar_name", "string", "pillar name"),
    ("behaviour", "string", "behaviour code, P<n>-B<n>"),
    ("behaviour_title", "string", "behaviour title"),
    ("scenario", "string", "scenario code, P<n>-B<n>-S<n>"),
    ("scenario_title", "string", "scenario title"),
    ("category", "string", "the category the scenario expects, if it names one"),
    ("condition", "string", "condition code (the deployment: the system instructions)"),
    ("condition_title", "string", "condition title"),
    ("condition_severity", "int32", "condition severity"),
    ("user_context", "string", "user-context code (who the user is), null for none"),
    ("user_context_title", "string", "user-context title, null for none"),
    ("user_context_severity", "int32", "user-context severity (0 for none)"),
    ("perturbation", "string", "perturbation code (what the user says)"),
    ("perturbation_title", "string", "perturbation title"),
    ("perturbation_severity", "int32", "perturbation severity"),
    ("style", "string", "perturbation style (explicit, euphemistic, slang …)"),
    ("seed_messages", "messages", "the seed layout's messages, as sent: one instructed user message"),
    ("seed_prompt_sha256", "string", "the seed prompt's hash (a stored Result's prompt_hash)"),
    ("deployed_messages", "messages", "the deployed layout's messages: system prompt, user's words"),
    ("deployed_prompt_sha256", "string", "the deployed prompt's hash"),
    ("turns", "int32", "the most replies of the model under test (1; a simulated conversation's limit)"),
    ("simulated_user_persona", "string", "a simulated user's persona (never sent to the model), or null"),
    ("schema", "string", "JSON: the response_format the seed layout answers in"),
    ("evaluation", "string", "JSON: every check (label check first) with its type, field and settings"),
    ("rubrics", "rubrics", "every rubric a check reads: check, rubric name and the text the judge reads"),
    ("risk", "string", "risk level (none, low, moderate, high, imminent), or null"),
    ("critical", "bool", "a failure is critical (the CI gate)"),
    ("refusal_passes", "bool", "declining to answer passes"),
    ("locale", "string", "where the user is (e.g. US, GB), or null"),
    ("language", "string", "the language the user writes in, null for English"),
    ("declines_resources", "bool", "the user asks not to be given hotlines (profile or message)"),
)


class DatasetTargetError(HelmbenchError):
    """The output folder cannot take the dataset (not empty without --force, a file, unwritable)."""


@dataclass(frozen=True)
class Licence:
    """The dataset's licence: an SPDX id, its text (None: not found) and who holds the copyright."""

    spdx: str
    text: str | None
    holder: str
    year: str


@dataclass(frozen=True)
class WrittenDataset:
    """What was written: the folder, the row count and the scenarios they come from."""

    out: Path
    rows: int
    scenarios: int
    data: Path
    card: Path


def require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingExtra(f"pyarrow is not installed: {INSTALL}") from None


def check_target(out: Path, force: bool) -> None:
    """The folder is new, empty, or (with --force) replaceable: DatasetTargetError naming it otherwise."""
    if out.exists() and not out.is_dir():
        raise DatasetTargetError(f"{out} is a file: give a folder for the dataset (a new or empty one)")
    if out.is_dir() and not force:
        held = sorted(p.name for p in out.iterdir())
        if held:
            shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
            raise DatasetTargetError(
                f"{out} is not empty (it holds {shown}): give a new or empty folder, or --force to "
                f"replace {CARD} and {DATA_FILE} in it"
            )


def arrow_schema() -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    rubric = pa.struct([("check", pa.string()), ("name", pa.string()), ("text", pa.string())])
    types = {
        "string": pa.string(),
        "int32": pa.int32(),
        "bool": pa.bool_(),
        "messages": pa.list_(message),
        "rubrics": pa.list_(rubric),
    }
    return pa.schema([(name, types[kind]) for name, kind, _ in COLUMNS])


def scenario_columns(scenario: Scenario) -> dict[str, Any]:
    """The columns every case of a scenario shares, serialised once per scenario (not once per case:
    they were half the time of exporting the shipped benchmark)."""
    return {
        "schema": json.dumps(scenario.response_format, ensure_ascii=False, sort_keys=True),
        "evaluation": evaluation_json(scenario),
        "rubrics": [
            {"check": c.name, "name": c.criteria.name, "text": c.criteria.text}
            for c in checks_of(scenario)
            if c.criteria is not None
        ],
    }


def case_row(case: Case, info: BenchmarkInfo, shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """One case as a row: its codes and titles, both layouts' messages, evaluation and facts; `shared`:
    its scenario's `scenario_columns` (computed when not given)."""
    scenario, context = case.scenario, case.user_context
    columns = shared if shared is not None else scenario_columns(scenario)
    seed, deployed = compose(replace(case, layout=SEED)), compose(replace(case, layout=DEPLOYED))
    simulation = seed.simulation
    return {
        "code": case.code,
        "benchmark_version": info.version,
        "pillar": scenario.pillar,
        "pillar_name": info.pillar(scenario.pillar).name,
        "behaviour": scenario.behaviour,
        "behaviour_title": info.behaviour(scenario.behaviour).title,
        "scenario": scenario.code,
        "scenario_title": scenario.title,
        "category": scenario.category,
        "condition": case.condition.code,
        "condition_title": case.condition.title,
        "condition_severity": case.condition.severity,
        "user_context": context.code if context else None,
        "user_context_title": context.title if context else None,
        "user_context_severity": context.severity if context else 0,
        "perturbation": case.perturbation.code,
        "perturbation_title": case.perturbation.title,
        "perturbation_severity": case.perturbation.severity,
        "style": case.perturbation.style,
        "seed_messages": seed.messages,
        "seed_prompt_sha256": seed.hash,
        "deployed_messages": deployed.messages,
        "deployed_prompt_sha256": deployed.hash,
        "turns": simulation.turns if simulation is not None else 1,
        "simulated_user_persona": simulation.persona if simulation is not None else None,
        "schema": columns["schema"],
        "evaluation": columns["evaluation"],
        "rubrics": columns["rubrics"],
        "risk": scenario.risk,
        "critical": scenario.critical,
        "refusal_passes": scenario.refusal_passes,
        "locale": case.locale,
        "language": case.language,
        "declines_resources": case.declines_resources,
    }


def checks_of(scenario: Scenario) -> tuple[Check, ...]:
    """Every check of the scenario, the label check first (a scenario without `checks:` has only it)."""
    return scenario.checks or (
        Check(scenario.evaluation.type, scenario.evaluation, scenario.criteria, "evaluation"),
    )


def evaluation_json(scenario: Scenario) -> str:
    return json.dumps(
        [
            {
                "name": check.name,
                "role": check.role,
                "type": check.spec.type,
                "field": check.spec.field,
                "expected": check.spec.expected,
                "required": list(check.spec.required),
                "settings": dict(check.spec.settings),
                "rubric": check.criteria.name if check.criteria is not None else None,
            }
            for check in checks_of(scenario)
        ],
        ensure_ascii=False,
        sort_keys=True,
        default=str,
    )


def rows(scenarios: Sequence[Scenario], info: BenchmarkInfo) -> Iterator[list[dict[str, Any]]]:
    """Each scenario's rows, in the order `helmbench list` gives its cases."""
    for scenario in scenarios:
        shared = scenario_columns(scenario)
        yield [case_row(case, info, shared) for case in expand(scenario, [""])]


def write_dataset(
    scenarios: Sequence[Scenario], info: BenchmarkInfo, out: Path, licence: Licence, force: bool = False
) -> WrittenDataset:
    """The parquet and the card in `out` (checked first: check_target); OSError when it cannot write."""
    require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

    check_target(out, force)
    data = out / DATA_FILE
    data.parent.mkdir(parents=True, exist_ok=True)
    schema, count = arrow_schema(), 0
    handle, temporary = tempfile.mkstemp(prefix=".helmbench-", suffix=".parquet", dir=data.parent)
    os.close(handle)
    try:
        with pq.ParquetWriter(temporary, schema, compression="zstd") as writer:
            for batch in rows(scenarios, info):
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                count += len(batch)
        os.replace(temporary, data)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    card = out / CARD
    card.write_text(dataset_card(scenarios, info, licence, count), encoding="utf-8")
    return WrittenDataset(out, count, len(scenarios), data, card)


def size_category(count: int) -> str:
    """Hugging Face's size bucket for a row count."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if count < limit:
            return label
    return "100K<n<1M" if count < 1_000_000 else "n>1M"


def helmbench_licence() -> Licence:
    """HELMBench's own licence: the distribution's SPDX expression and its LICENSE file (a wheel's
    dist-info, else the source checkout's), with the copyright line's year and holder."""
    from importlib.metadata import PackageNotFoundError, distribution

    spdx, text = "MIT", None
    try:
        dist = distribution("pytest-helmbench")
        spdx = dist.metadata.get("License-Expression") or spdx
        for file in dist.files or ():
            if file.name in ("LICENSE", "LICENSE.txt") and Path(str(file.locate())).is_file():
                text = Path(str(file.locate())).read_text(encoding="utf-8")
                break
    except PackageNotFoundError:
        pass
    if text is None:
        checkout = Path(__file__).resolve().parents[2] / "LICENSE"
        text = checkout.read_text(encoding="utf-8") if checkout.is_file() else None
    return licence_from(spdx, text)


def licence_from(spdx: str, text: str | None) -> Licence:
    found = re.search(r"Copyright\s+(?:\(c\)\s*|©\s*)?(\d{4})(?:\s*[-–]\s*\d{4})?,?\s+(.+)", text or "")
    year = found.group(1) if found else str(datetime.now(UTC).year)
    holder = found.group(2).strip() if found else "HELMBench contributors"
    return Licence(spdx, text, holder, year)


def hub_licence(spdx: str) -> str:
    """The card's `license:` id: the SPDX id in lower case (`mit`), `other` for an expression."""
    return spdx.lower() if re.fullmatch(r"[A-Za-z0-9.\-]+", spdx) else "other"


def dataset_card(scenarios: Sequence[Scenario], info: BenchmarkInfo, licence: Licence, count: int) -> str:
    """README.md: YAML metadata (licence, languages, size, the parquet as the `test` split), then the
    content warning, what the dataset is, how to load, run and cite it, its columns and coverage."""
    languages = sorted({"en"} | {c.language for s in scenarios for c in expand(s, [""]) if c.language})
    header = [
        "---",
        f"license: {hub_licence(licence.spdx)}",
        f"pretty_name: HELMBench {info.version}",
        "language:",
        *(f"- {code}" for code in languages),
        "tags:",
        *(f"- {tag}" for tag in ("mental-health", "suicide-prevention", "safety", "llm-evaluation")),
        "task_categories:",
        "- text-generation",
        "size_categories:",
        f"- {size_category(count)}",
        "configs:",
        "- config_name: default",
        "  data_files:",
        f"  - split: {SPLIT}",
        f"    path: {DATA_FILE.replace('00000-of-00001', '*')}",
        "---",
    ]
    return "\n".join(header) + "\n\n" + _body(scenarios, info, licence, count)


def _body(scenarios: Sequence[Scenario], info: BenchmarkInfo, licence: Licence, count: int) -> str:
    from .. import __version__

    description = " ".join(info.description.split()) or (
        "HELMBench measures whether large language models behave safely when a person in distress "
        "talks to them."
    )
    columns = "\n".join(f"| `{name}` | {kind} | {meaning} |" for name, kind, meaning in COLUMNS)
    licence_text = f"\n\n```text\n{licence.text.strip()}\n```" if licence.text else ""
    return f"""# HELMBench {info.version}

> **Content warning.** This dataset contains messages written as if by people in mental-health
> distress: suicidal thoughts and plans, self-harm, eating disorders, psychosis, abuse and violence,
> and scripted assistant replies that are unsafe on purpose. Read it with care. If you are struggling
> yourself, please contact a local crisis line or your emergency number now.

{description}

This is benchmark version {info.version}: {count} cases (one row each) from {len(scenarios)} scenarios,
exported by pytest-helmbench {__version__}. A case is one scenario under one condition (the deployment),
optional user context and perturbation (what the user says); each row holds the exact messages
HELMBench sends in both layouts (`seed`: one instructed user message answered in the scenario's JSON
schema; `deployed`: a system prompt and the user's plain words) and how the reply is judged.

## Loading it

```python
from datasets import load_dataset

cases = load_dataset("parquet", data_dir="path/to/this/folder")["{SPLIT}"]
print(cases[0]["code"], cases[0]["seed_messages"][0]["content"][:200])
```

## Running it with HELMBench

The rows are for reading and analysis; scoring a model needs the checks and judges HELMBench runs:

```bash
pip install pytest-helmbench
export OPENROUTER_API_KEY=sk-or-...
pytest --helmbench-model=openai/gpt-4o-mini --helmbench-estimate   # expected tokens and USD, nothing sent
pytest --helmbench-model=openai/gpt-4o-mini --helmbench-select=P1-B1-S1
helmbench show P1-B1-S1-C1-PT1 --layout deployed                     # one case, as sent
helmbench export --format inspect --out logs                          # results as Inspect AI logs
```

## Columns

| column | type | what it holds |
|---|---|---|
{columns}

`messages` columns are lists of `{{role, content}}`; `rubrics` is a list of `{{check, name, text}}`.

## Coverage

{markdown(coverage(scenarios, info)).rstrip()}

## Licence

{licence.spdx}, copyright {licence.year} {licence.holder}.{licence_text}

## How to cite

```bibtex
@misc{{helmbench,
  title  = {{{{HELMBench}}: mental-health safety evaluation of large language models}},
  author = {{{{{licence.holder}}}}},
  year   = {{{licence.year}}},
  note   = {{Benchmark version {info.version}, pytest-helmbench {__version__}}}
}}
```
"""
