"""The --helmbench-* options as pytest sees them: registration, and the one precedence rule.

Every option has an ini twin and, mostly, an environment variable; a value is read from the
command line, then the environment, then the ini file, then the option's default.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import OPENROUTER_BASE_URL, OptionSource
from ..errors import ConfigError
from ..suite.cases import parse_selectors
from ..suite.shards import parse_shard

if TYPE_CHECKING:  # pytest itself is imported only where a session needs it: `helmbench` starts faster
    import pytest


@dataclass(frozen=True)
class Option:
    """One --helmbench-* option with its ini twin and environment variable."""

    name: str
    help: str
    env: str | None = None
    default: Any = None
    kind: str = "string"  # string | bool | list | optional (flag with an optional value)
    const: str | None = None  # the value of an `optional` flag given without one
    ini: bool = True  # False: command line and environment only (a repository's ini cannot lower it)


OPTIONS: tuple[Option, ...] = (
    Option(
        "model",
        "model id(s) to evaluate; comma-separated and repeatable (default: models.yml)",
        "HELMBENCH_MODEL",
        kind="list",
    ),
    Option(
        "marking-model",
        "judge model(s) for sqe checks; a,b,c is a panel, each judged case is judged by all "
        "(default: models.yml marking_model)",
        "HELMBENCH_MARKING_MODEL",
    ),
    Option(
        "judge-policy",
        "how a panel's verdicts combine: majority (default; a tie fails), all-pass or any-fail",
        "HELMBENCH_JUDGE_POLICY",
        "majority",
    ),
    Option(
        "layout",
        "seed (default: the instructed JSON prompt), deployed (system prompt, plain reply, extracted by "
        "the marking model) or seed,deployed (both: item ids gain [seed] / [deployed])",
        "HELMBENCH_LAYOUT",
        "seed",
    ),
    Option(
        "user-model",
        "the model that plays the simulated user of `simulate:` conversations (default: the first "
        "marking model)",
        "HELMBENCH_USER_MODEL",
    ),
    Option(
        "critical-votes",
        "in a critical scenario each judged verdict, pass or fail, is the majority of this many calls of "
        "a lone judge (each with its own seed; odd, default 3; 1: one call; a panel's policy decides)",
        "HELMBENCH_CRITICAL_VOTES",
        "3",
    ),
    Option(
        "db",
        "SQLAlchemy URL of the results database (default: sqlite file helmbench.db in the rootdir)",
        "HELMBENCH_DB",
    ),
    Option(
        "base-url", "API base URL (default: OpenRouter's /api/v1)", "OPENROUTER_BASE_URL", OPENROUTER_BASE_URL
    ),
    Option(
        "api",
        "openrouter (default) or openai (standard fields only: Ollama, vLLM, llama.cpp, LM Studio)",
        "HELMBENCH_API",
        "openrouter",
    ),
    Option(
        "dry-run",
        "compose and validate every case, send nothing, record nothing",
        "HELMBENCH_DRY_RUN",
        False,
        "bool",
    ),
    Option("temperature", "sampling temperature (default 0)", "HELMBENCH_TEMPERATURE", "0"),
    Option("max-tokens", "max_tokens per call (default 4096)", "HELMBENCH_MAX_TOKENS", "4096"),
    Option("seed", "sampling seed sent with every call (default: none)", "HELMBENCH_SEED"),
    Option("timeout", "seconds per HTTP call before it is retried (default 120)", "HELMBENCH_TIMEOUT", "120"),
    Option(
        "retries",
        "retries of a transient failure (429, 5xx, timeouts) before the case errors (default 5)",
        "HELMBENCH_RETRIES",
        "5",
    ),
    Option(
        "backoff",
        "first retry delay in seconds, doubled each retry, capped at 60 (default 1)",
        "HELMBENCH_BACKOFF",
        "1",
    ),
    Option(
        "select",
        "segment-aware code selection, e.g. P1-B1-S1 (never P1-B1-S10), C2, U0 (no user context); "
        "comma-separated, repeatable",
        "HELMBENCH_SELECT",
        kind="list",
    ),
    Option(
        "concurrency",
        "model calls in flight at once in one process (default 8; adaptive on 429; use -n or this, not both)",
        "HELMBENCH_CONCURRENCY",
        "8",
    ),
    Option(
        "cache",
        "response cache: off, read, write or on (default: on at temperature 0, else off)",
        "HELMBENCH_CACHE",
    ),
    Option(
        "cache-ttl",
        "ignore cached responses older than this (e.g. 30d, 12h; default: never expire)",
        "HELMBENCH_CACHE_TTL",
    ),
    Option(
        "prices",
        "a price file for models /models does not price or when it cannot be fetched (offline): a saved "
        "/models answer, or YAML `model/id: {prompt: USD per token, completion: USD per token}`",
        "HELMBENCH_PRICES",
    ),
    Option(
        "max-cost",
        "USD ceiling for this session across all workers; cases past it are recorded as skipped",
        "HELMBENCH_MAX_COST",
    ),
    Option(
        "resume",
        "complete the latest incomplete run of each model (or =RUN_ID): "
        "run only missing, errored or changed cases",
        "HELMBENCH_RESUME",
        kind="optional",
        const="latest",
    ),
    Option(
        "retry-errors",
        "rerun only the errored cases of each model's latest run (or =RUN_ID), in that run",
        "HELMBENCH_RETRY_ERRORS",
        kind="optional",
        const="latest",
    ),
    Option(
        "changed",
        "run only the cases whose composed prompt, schema or evaluation changed since each model's "
        "completed runs (a case never evaluated counts as changed)",
        "HELMBENCH_CHANGED",
        False,
        "bool",
    ),
    Option(
        "estimate",
        "print expected tokens and USD for the selected cases, then stop (nothing is sent)",
        "HELMBENCH_ESTIMATE",
        False,
        "bool",
    ),
    Option(
        "repeat",
        "run each case N times (pass rate with a 95% Wilson interval, pass^k)",
        "HELMBENCH_REPEAT",
        "1",
    ),
    Option(
        "sample",
        "run N cases picked deterministically (seeded), stratified so every behaviour is represented",
        "HELMBENCH_SAMPLE",
    ),
    Option("sample-seed", "seed of --helmbench-sample (default 0)", "HELMBENCH_SAMPLE_SEED", "0"),
    Option(
        "shard",
        "run shard K of N (e.g. 2/3): a deterministic, behaviour-balanced 1/N of the selected cases",
        "HELMBENCH_SHARD",
    ),
    Option(
        "run-key",
        "every process given the same key joins one run per model (e.g. the CI pipeline id)",
        "HELMBENCH_RUN_KEY",
    ),
    Option(
        "baseline",
        "a baseline file (`helmbench baseline save`): the summary compares each model's cases with it",
        "HELMBENCH_BASELINE",
    ),
    Option(
        "fail-on-regression",
        "with --helmbench-baseline: exit 13 when a critical case newly fails or the harm rate rose "
        "beyond its interval",
        "HELMBENCH_FAIL_ON_REGRESSION",
        False,
        "bool",
    ),
    Option(
        "mlflow",
        "log each stored run (headline and per-behaviour figures, the report as an artifact) to MLflow's "
        "active tracking URI, experiment helmbench unless MLFLOW_EXPERIMENT_NAME says otherwise "
        "(the mlflow extra)",
        "HELMBENCH_MLFLOW",
        False,
        "bool",
    ),
    Option(
        "fail-under",
        "exit non-zero when a model's score (0-100) is below this "
        "(exit statuses: docs/reference/exit-codes.md)",
        "HELMBENCH_FAIL_UNDER",
    ),
    Option(
        "allow-insecure",
        "allow plain http:// base URLs to hosts other than loopback (prompts and any key travel unencrypted)",
        "HELMBENCH_ALLOW_INSECURE",
        False,
        "bool",
        ini=False,
    ),
    Option(
        "max-file-size",
        "largest benchmark file read, in bytes (default 1048576 = 1 MB); a larger one is a collection error",
        "HELMBENCH_MAX_FILE_SIZE",
    ),
    Option(
        "umask",
        "the umask of files a run creates (database, reports, logs): 077 (default: readable by you only; "
        "they hold conversations about suicide), another octal mask such as 027, or keep (the process's)",
        "HELMBENCH_UMASK",
        "077",
    ),
)


def parse_umask(value: Any, where: str = "--helmbench-umask") -> int | None:
    """An octal umask (`077`, `0027`), or None for `keep`; anything else is a ConfigError."""
    text = str(value).strip().lower()
    if text == "keep":
        return None
    if re.fullmatch("0?[0-7]{3}", text):
        return int(text, 8)
    raise ConfigError(f"{where}: {value!r} must be an octal umask such as 077 or 027, or keep")


def option_dest(name: str) -> str:
    """`max-cost` -> `helmbench_max_cost`: the argparse destination and the ini name."""
    return "helmbench_" + name.replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    """Each option as a flag in the `helmbench` group plus its ini twin, and `helmbench_root`."""
    group = parser.getgroup("helmbench", "HELMBench mental-health safety benchmark")
    for option in OPTIONS:
        flag = f"--helmbench-{option.name}"
        # argparse formats help with %: a literal one ("95% Wilson") must be doubled, or --help crashes
        text = option.help.replace("%", "%%") + (f" [env {option.env}]" if option.env else "")
        dest = option_dest(option.name)
        if option.kind == "bool":
            group.addoption(flag, action="store_true", default=None, dest=dest, help=text)
            if option.ini:
                parser.addini(dest, option.help, type="bool", default=False)
            continue
        if option.kind == "optional":
            group.addoption(flag, nargs="?", const=option.const, default=None, dest=dest, help=text)
        elif option.kind == "list":
            group.addoption(flag, action="append", default=None, dest=dest, help=text)
        else:
            group.addoption(flag, default=None, dest=dest, help=text)
        parser.addini(dest, option.help, default="")
    parser.addini(
        "helmbench_root",
        "benchmark root folder, relative to the rootdir (default: benchmark; without one, an explicit "
        "--helmbench-* option runs the installed benchmark)",
        default="",  # unset: benchmark_root.resolve_root decides
    )


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line, then environment variable, then ini, then the default."""
    cli = config.getoption(option_dest(option.name), None)
    if cli not in (None, [], False):
        return cli
    env = os.environ.get(option.env, "") if option.env else ""
    if env.strip():
        if option.kind == "bool":
            return flag_value(env, option.env or "")
        if option.kind == "optional":
            return optional_value(option, env, option.env or "")
        return [env] if option.kind == "list" else env
    ini = _ini(config, option) if option.ini else None
    if option.kind == "optional" and isinstance(ini, str) and ini.strip():
        return optional_value(option, ini, f"ini {option_dest(option.name)}")
    if ini not in (None, "", [], False):
        return ini if option.kind != "list" else [ini]
    return option.default


FLAG_ON = ("1", "true", "yes", "on")
FLAG_OFF = ("0", "false", "no", "off")
_FLAG_WORDS = f"{', '.join(FLAG_ON)} (on) or {', '.join(FLAG_OFF)} (off)"


def flag_value(text: str, where: str) -> bool:
    """The one rule for a boolean environment variable (case and spaces ignored); anything else is a
    ConfigError naming the variable and the accepted values, never silently off."""
    word = text.strip().lower()
    if word in FLAG_ON or word in FLAG_OFF:
        return word in FLAG_ON
    raise ConfigError(f"{where}={text!r} is not a yes/no value: use {_FLAG_WORDS}")


def optional_value(option: Option, text: str, where: str) -> str | None:
    """A flag with an optional value (--helmbench-resume[=RUN_ID]) from the environment or ini: an on
    word is the flag alone, an off word is off (None), else its value (`latest` or a run id)."""
    word = text.strip().lower()
    if word in FLAG_ON:
        return option.const
    if word in FLAG_OFF:
        return None
    if word == option.const or re.fullmatch("[0-9]+", word):
        return word
    raise ConfigError(f"{where}={text!r}: use a run id (a whole number), {option.const}, or {_FLAG_WORDS}")


def _ini(config: pytest.Config, option: Option) -> Any:
    """pytest parses a bool ini value by its own rule; a value it cannot read is a ConfigError too."""
    try:
        return config.getini(option_dest(option.name))
    except (ValueError, _usage_error()) as exc:  # pytest 8 raises the first, 9 the second
        raise ConfigError(f"ini {option_dest(option.name)}: {exc}") from None


def _usage_error() -> type[Exception]:
    import pytest

    return pytest.UsageError


def check_options(config: pytest.Config) -> None:
    """Read every option once: a bad value anywhere is a ConfigError now, not later mid-collection
    (under xdist too: the controller reads them before any worker collects)."""
    values = {option.name: option_value(config, option) for option in OPTIONS}
    for name in ("resume", "retry-errors"):
        check_run_choice(name, values[name])
    try:
        parse_shard(values["shard"])
    except ValueError as exc:
        raise ConfigError(f"--helmbench-shard / HELMBENCH_SHARD: {exc}") from None
    try:
        parse_selectors(values["select"] or [])
    except ValueError as exc:
        raise ConfigError(f"--helmbench-select: {exc}") from None


def check_run_choice(name: str, value: Any) -> None:
    """--helmbench-resume / --helmbench-retry-errors: no value (the latest run), `latest` or a run id."""
    if value is None or value is False:
        return
    text = str(value).strip()
    if text != "latest" and not re.fullmatch("[0-9]+", text):
        raise ConfigError(
            f"--helmbench-{name}: {value!r} is not a run id: use --helmbench-{name} alone or =latest "
            f"(the latest run), or --helmbench-{name}=RUN_ID (a whole number)"
        )


def option_source(config: pytest.Config, option: Option) -> OptionSource:
    """Where `option_value` takes the value from (same precedence: command line, environment, ini)."""
    if config.getoption(option_dest(option.name), None) not in (None, [], False):
        return OptionSource.CLI
    if option.env and os.environ.get(option.env, "").strip():
        return OptionSource.ENV
    if option.ini and config.getini(option_dest(option.name)) not in (None, "", [], False):
        return OptionSource.INI
    return OptionSource.DEFAULT


def option_named(name: str) -> Option:
    return next(o for o in OPTIONS if o.name == name)
