"""`helmbench export --format inspect`: one Inspect AI eval log per run (one model), for Inspect's viewer
and the tools that read its logs.

The log is built from inspect_ai's own Pydantic types and written by its own writer (the `.eval`
format), so it is exactly what `inspect_ai.log.read_eval_log` reads; inspect-ai is the optional
`inspect` extra, imported here lazily. The log format version is pinned (LOG_FORMAT_VERSION): an
inspect-ai whose logs have another version is refused with a one-line error, never written under a
version it does not match.

Each stored Result is one sample: its id the case code (`@deployed` appended for the deployed layout),
its epoch the repeat + 1; the messages up to the model's first reply as its input, every message as
sent as its messages, the model's reply as its output (the provider's raw body in the output's
metadata), the case's verdict as the `helmbench` score and each check as a score of its own, its
explanation the judges' rationale (else the check's reason), and the tokens of the model and of its
judges (role `grader`). The run's headline figures are the log's results. What the model and the
judges wrote goes in as data (message contents, score explanations), never into a file name.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlmodel import Session

from ..codes import SEED, code_sort_key
from ..errors import HelmbenchError
from ..providers.chat import Transient, read_completion
from ..redaction import redact
from ..storage.queries import RunInfo, load_case_results, load_runs
from ..storage.transcripts import Transcript, iter_transcripts, run_benchmark
from .frames import MissingExtra
from .headline import headline

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage
    from inspect_ai.scorer import Score

#: The Inspect eval log format written (EvalLog.version): inspect-ai 0.3's logs are version 2.
LOG_FORMAT_VERSION = 2
#: The task name of every log, and the name of the score that holds the case's verdict.
TASK = "helmbench"
#: The model role the judges' tokens are counted under (Inspect's name for a grading model).
GRADER = "grader"
#: The case's and each check's status as an Inspect score value: correct, incorrect, no answer.
VALUES = {"passed": "C", "failed": "I"}
NO_ANSWER = "N"
STOP_REASONS = {"stop": "stop", "length": "max_tokens", "content_filter": "content_filter"}
LOG_STATUS = {"completed": "success", "interrupted": "cancelled", "running": "started"}
INSTALL = "pip install 'pytest-helmbench[inspect]'"


class InspectFormatError(HelmbenchError):
    """The installed inspect-ai writes another log format version than the one HELMBench pins."""


@dataclass(frozen=True)
class WrittenLog:
    """One eval log written: the run, its model, the file and how many samples it holds."""

    run_id: int
    model: str
    path: Path
    samples: int


def require_inspect() -> None:
    """inspect-ai is installed and writes LOG_FORMAT_VERSION logs: MissingExtra (naming the extra) or
    InspectFormatError otherwise."""
    try:
        from inspect_ai.log import EvalLog
    except ImportError:
        raise MissingExtra(f"inspect-ai is not installed: {INSTALL}") from None
    check_format(EvalLog.model_fields["version"].default)


def check_format(installed: Any) -> None:
    """Refuse an inspect-ai whose logs are not LOG_FORMAT_VERSION (its types would not fit the pin)."""
    if installed != LOG_FORMAT_VERSION:
        from importlib.metadata import version

        raise InspectFormatError(
            f"inspect-ai {version('inspect-ai')} writes eval log format {installed}, and HELMBench writes "
            f"format {LOG_FORMAT_VERSION}: install the inspect-ai its extra names ({INSTALL})"
        )


def write_logs(session: Session, run_ids: Sequence[int], folder: Path) -> list[WrittenLog]:
    """One `.eval` log per run in `folder` (made if missing), by run id; an existing log of the same
    run and start time is replaced. DatasetError for an unknown run (the caller resolves the ids)."""
    require_inspect()
    from inspect_ai.log import write_eval_log

    written = []
    for run in sorted(load_runs(session, run_ids), key=lambda r: r.id):
        log = eval_log(session, run)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / log_name(run)
        write_eval_log(log, str(path), format="eval")
        written.append(WrittenLog(run.id, run.model, path, len(log.samples or ())))
    return written


def log_name(run: RunInfo) -> str:
    """`<start>_helmbench_<model>_run<N>.eval`, Inspect's `{timestamp}_{task}_{model}_{id}` pattern; the
    model id reduced to letters, digits, dots and dashes (it names a file, so it is never a path)."""
    started = _utc(run.started_at).strftime("%Y-%m-%dT%H-%M-%S+00-00")
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", run.model).strip("-.") or "model"
    return f"{started}_{TASK}_{slug}_run{run.id}.eval"


def eval_log(session: Session, run: RunInfo) -> EvalLog:
    """The run as an Inspect EvalLog: spec, samples, results and stats."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, EvalStats

    benchmark = run_benchmark(session, run.id)
    samples = _samples(iter_transcripts(session, run.id), run.model)
    figures, scored_now = _figures(session, run)
    spec = EvalSpec(
        eval_id=_stable_id("eval", run.session_id, run.id),
        run_id=_stable_id("run", run.session_id),
        created=_iso(run.started_at),
        task=TASK,
        task_id=f"run{run.id}",
        task_version=benchmark.version,
        task_display_name="HELMBench",
        dataset=EvalDataset(
            name=f"{TASK}-{benchmark.version}",
            samples=len({s.id for s in samples}),
            sample_ids=list(dict.fromkeys(s.id for s in samples)),
            shuffled=False,
        ),
        model=run.model,
        config=EvalConfig(epochs=max((s.epoch for s in samples), default=1)),
        packages=_packages(),
        metadata=_run_metadata(run, benchmark.content_hash),
    )
    return EvalLog(
        version=LOG_FORMAT_VERSION,
        status=LOG_STATUS.get(run.status, "started"),  # type: ignore[arg-type]
        eval=spec,
        results=_results(samples, figures, scored_now),
        stats=EvalStats(
            started_at=_iso(run.started_at),
            completed_at=_iso(run.finished_at) if run.finished_at else "",
            model_usage=_total(s.model_usage for s in samples),
            role_usage=_total(s.role_usage for s in samples),
        ),
        samples=samples,
        tags=[TASK],
    )


def sample_id(case_code: str, layout: str) -> str:
    """The case code for the seed layout (every run before layouts existed), `<code>@deployed` else."""
    return case_code if layout == SEED else f"{case_code}@{layout}"


def _samples(transcripts: Iterable[Transcript], model: str) -> list[EvalSample]:
    """One sample per (case, layout, repeat), ordered by code and repeat; a case stored twice in one
    run (which a resumed run does not do) keeps its latest Result."""
    found = {}
    for transcript in transcripts:
        found[(transcript.case_code, transcript.layout, transcript.repeat)] = _sample(transcript, model)
    return [found[key] for key in sorted(found, key=lambda k: (code_sort_key(k[0]), k[1] != SEED, k[2]))]


def _sample(t: Transcript, model: str) -> EvalSample:
    from inspect_ai.log import EvalError, EvalSample

    sent, everything, reply = conversation(t)
    usage = _usage(t.prompt_tokens, t.completion_tokens, t.cost_usd)
    judges = _usage(t.judge_prompt_tokens, t.judge_completion_tokens, t.judge_cost_usd)
    return EvalSample(
        id=sample_id(t.case_code, t.layout),
        epoch=t.repeat + 1,
        input=_chat(sent, model),
        target=_target(t.expected),
        messages=_chat(everything, model),
        output=_output(t, model, reply, usage),
        scores=scores(t),
        metadata=_case_metadata(t),
        model_usage={model: usage} if usage is not None else {},
        role_usage={GRADER: judges} if judges is not None else {},
        completed_at=_iso(t.created_at) if t.created_at else None,
        total_time=t.latency_ms / 1000 if t.latency_ms is not None else None,
        error=EvalError(message=redact(t.reason), traceback="", traceback_ansi="")
        if t.status == "error"
        else None,
    )


def conversation(t: Transcript) -> tuple[list[dict[str, str]], list[dict[str, str]], str | None]:
    """(the messages up to the model's first reply, every message, the model's reply shown): a
    conversation's first judged reply follows its n-th user message (the turn index); a case of one
    reply follows its last user message. The reply is the last assistant message after the input, or
    for a case stored as its one user message, the content of the provider's body."""
    if t.messages is None:
        messages = [{"role": "user", "content": t.prompt}]
        reply = _body_content(t.raw_response)
        return (
            messages,
            messages + ([{"role": "assistant", "content": reply}] if reply is not None else []),
            reply,
        )
    messages = [
        {"role": str(m.get("role")), "content": str(m.get("content") or "")}
        for m in t.messages
        if isinstance(m, dict)
    ]
    users = [index for index, m in enumerate(messages) if m["role"] == "user"]
    turns = [turn.get("turn") for turn in t.details.get("turns") or () if isinstance(turn, dict)]
    first = min((n for n in turns if isinstance(n, int) and 1 <= n <= len(users)), default=len(users))
    end = users[first - 1] + 1 if users else len(messages)
    replies = [m["content"] for m in messages[end:] if m["role"] == "assistant"]
    return messages[:end], messages, replies[-1] if replies else None


def _body_content(raw: str | None) -> str | None:
    """The reply in a provider's chat-completions body (None: no body, or an error body)."""
    if not raw:
        return None
    try:
        return read_completion(raw, model="", latency_ms=0.0, attempts=0, cost=lambda _: None).content
    except Transient:  # an error body, or no JSON: no reply
        return None


def _chat(messages: list[dict[str, str]], model: str) -> list[ChatMessage]:
    """Inspect chat messages, content as plain text: system and assistant by role, anything else the
    user's."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    made: list[ChatMessage] = []
    for message in messages:
        if message["role"] == "system":
            made.append(ChatMessageSystem(content=message["content"]))
        elif message["role"] == "assistant":
            made.append(ChatMessageAssistant(content=message["content"], model=model))
        else:
            made.append(ChatMessageUser(content=message["content"]))
    return made


def _output(t: Transcript, model: str, reply: str | None, usage: ModelUsage | None) -> ModelOutput:
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput

    choices = []
    if reply is not None:
        stop = STOP_REASONS.get(t.finish_reason or "", "unknown")
        message = ChatMessageAssistant(content=reply, model=model)
        choices.append(ChatCompletionChoice(message=message, stop_reason=stop))  # type: ignore[arg-type]
    return ModelOutput(
        model=model,
        choices=choices,
        usage=usage,
        time=t.latency_ms / 1000 if t.latency_ms is not None else None,
        metadata={"raw_response": t.raw_response} if t.raw_response is not None else None,
    )


def scores(t: Transcript) -> dict[str, Score]:
    """The case's verdict (`helmbench`), then each check by its name (`check:<name>` should a name be
    taken); a Result stored with one judge's verdict and no checks: that verdict by its evaluation."""
    from inspect_ai.scorer import Score

    found = {
        TASK: Score(
            value=VALUES.get(t.status, NO_ANSWER),
            answer=_text(t.actual),
            explanation=redact(t.reason) or None,
            metadata=_verdict_metadata(t),
        )
    }
    checks = [c for c in t.details.get("checks") or () if isinstance(c, dict)]
    judge = t.details.get("judge")
    if not checks and isinstance(judge, dict):
        checks = [{"name": t.details.get("evaluation") or "judge", "status": t.status, "judges": [judge]}]
    for check in checks:
        name = str(check.get("name") or check.get("type") or "check")
        key = name if name not in found else f"check:{name}"
        while key in found:
            key += "'"
        found[key] = _check_score(check)
    return found


def _check_score(check: dict[str, Any]) -> Score:
    from inspect_ai.scorer import Score

    judges = [j for j in check.get("judges") or () if isinstance(j, dict)]
    reason = redact(str(check.get("reason") or ""))
    return Score(
        value=VALUES.get(str(check.get("status")), NO_ANSWER),
        explanation=rationale(judges) or reason or None,
        metadata={
            "type": check.get("type"),
            "role": check.get("role"),
            "status": check.get("status"),
            "reason": reason,
            "judges": [
                {key: j.get(key) for key in ("model", "passed", "values", "answers", "rationale", "error")}
                for j in judges
            ],
        },
    )


def rationale(judges: list[dict[str, Any]]) -> str:
    """One judge's rationale as it wrote it; a panel's, each after its model's id."""
    given = [(str(j.get("model") or "judge"), str(j["rationale"])) for j in judges if j.get("rationale")]
    if len(given) == 1:
        return given[0][1]
    return "\n\n".join(f"{model}: {text}" for model, text in given)


def _verdict_metadata(t: Transcript) -> dict[str, Any]:
    turns = [
        {
            "turn": turn.get("turn"),
            "status": turn.get("status"),
            "reason": redact(str(turn.get("reason") or "")),
        }
        for turn in t.details.get("turns") or ()
        if isinstance(turn, dict)
    ]
    found: dict[str, Any] = {"status": t.status, "critical": t.critical}
    if turns:
        found["turns"] = turns
        found["first_failing_turn"] = t.details.get("first_failing_turn")
    if isinstance(t.details.get("confirmation"), dict):
        found["confirmation"] = t.details["confirmation"]
    return found


def _case_metadata(t: Transcript) -> dict[str, Any]:
    return {
        "result_id": t.result_id,
        "case_code": t.case_code,
        "layout": t.layout,
        "repeat": t.repeat,
        "status": t.status,
        "pillar": t.pillar,
        "behaviour": t.behaviour,
        "scenario": t.scenario,
        "condition": t.condition,
        "user_context": t.user_context,
        "perturbation": t.perturbation,
        "critical": t.critical,
        "cached": t.cached,
        "cost_usd": t.cost_usd,
        "judge_cost_usd": t.judge_cost_usd,
        "latency_ms": t.latency_ms,
        "finish_reason": t.finish_reason,
        "prompt_hash": t.prompt_hash,
    }


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _target(expected: Any) -> str | list[str]:
    """What the case expected (the label check's value), as Inspect's target; "" when nothing was."""
    if isinstance(expected, list) and all(isinstance(item, str) for item in expected):
        return list(expected)
    return _text(expected) or ""


def _usage(prompt: int | None, completion: int | None, cost: float | None) -> ModelUsage | None:
    """Tokens and USD as Inspect's usage (None: nothing known; an unknown count is 0)."""
    from inspect_ai.model import ModelUsage

    if prompt is None and completion is None and cost is None:
        return None
    return ModelUsage(
        input_tokens=prompt or 0,
        output_tokens=completion or 0,
        total_tokens=(prompt or 0) + (completion or 0),
        total_cost=cost,
    )


def _total(usages: Iterable[dict[str, ModelUsage]]) -> dict[str, ModelUsage]:
    """The samples' usage added up per model (or role)."""

    totals: dict[str, ModelUsage] = {}
    for usage in usages:
        for name, found in usage.items():
            seen = totals.get(name)
            if seen is None:
                totals[name] = found.model_copy()
                continue
            seen.input_tokens += found.input_tokens
            seen.output_tokens += found.output_tokens
            seen.total_tokens += found.total_tokens
            if found.total_cost is not None:
                seen.total_cost = (seen.total_cost or 0.0) + found.total_cost
    return totals


def _figures(session: Session, run: RunInfo) -> tuple[dict[str, Any], bool]:
    """The run's stored headline figures; a run that stored none is scored now (as `scores(db)` does)."""
    if run.scores:
        return dict(run.scores), False
    return headline(load_case_results(session, [run.id])), True


def headline_numbers(figures: dict[str, Any]) -> dict[str, float]:
    """The headline's figures as numbers, in its order: a version 3 figure (`{"value", "ci_low",
    "ci_high"}`) by its value (so harm_rate, the headline, comes first), then the counts; never the
    scoring version."""
    found: dict[str, float] = {}
    for name, value in figures.items():
        if isinstance(value, dict) and isinstance(value.get("value"), int | float):
            found[name] = value["value"]
        elif isinstance(value, int | float) and not isinstance(value, bool) and not name.endswith("version"):
            found[name] = value
    return found


def _results(samples: list[EvalSample], figures: dict[str, Any], scored_now: bool) -> Any:
    """The headline's numbers as the `helmbench` score's metrics, in the headline's order (the first is
    Inspect's headline metric); its other values (the scoring version, the gate, the panel) as that
    score's metadata."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    numbers = headline_numbers(figures)
    scored = sum(s.scores is not None and s.scores[TASK].value in VALUES.values() for s in samples)
    other = {name: value for name, value in figures.items() if name not in numbers or isinstance(value, dict)}
    return EvalResults(
        total_samples=len(samples),
        completed_samples=scored,
        scores=[
            EvalScore(
                name=TASK,
                scorer=TASK,
                scored_samples=scored,
                unscored_samples=len(samples) - scored,
                metrics={name: EvalMetric(name=name, value=value) for name, value in numbers.items()},
                metadata={**other, "scored_now": scored_now},
            )
        ],
    )


def _run_metadata(run: RunInfo, content_hash: str) -> dict[str, Any]:
    return {
        "helmbench_run_id": run.id,
        "run_status": run.status,
        "benchmark_content_hash": content_hash,
        "scoring_version": run.scoring_version,
        "judges": list(run.judges),
        "judge_policy": run.judge_policy,
        "calibration_id": run.calibration_id,
        "subset": run.subset,
        "selected_cases": run.selected_cases,
        "benchmark_cases": run.benchmark_cases,
        "cost_usd": run.cost_usd,
        "judge_cost_usd": run.judge_cost_usd,
        "options": run.options,
    }


def _packages() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("pytest-helmbench", "inspect_ai"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _stable_id(*parts: Any) -> str:
    """An id that is the same each time the same run is exported (Inspect's are 22 characters)."""
    return hashlib.sha256(":".join(str(p) for p in parts).encode("utf-8")).hexdigest()[:22]


def _utc(moment: datetime) -> datetime:
    """A stored time (UTC, naive in the database) as an aware one."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _iso(moment: datetime) -> str:
    return _utc(moment).isoformat()
