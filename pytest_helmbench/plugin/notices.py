"""What HELMBench says before the first case runs: that (and why) a session is a dry run, that a judge
comes from the provider family of a model it judges, and what the providers found out while
preparing (a local server's slot ceiling).

A dry run is never silent: its line is the first one HELMBench prints, naming the flag, environment
variable or ini setting that asked for it, or the key that is missing and for which models.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..config import family_warning
from ..reporting.safe_text import for_terminal
from ..trust import KEY_ENV, OptionSource
from .options import option_named, option_source
from .state import HelmbenchState

log = logging.getLogger(__name__)

SAYS_NOTHING_SENT = "every case is composed and validated; nothing is sent or recorded"
KEYLESS_HINT = (
    " (to send: set it, or for a keyless OpenAI-compatible server such as Ollama, vLLM, llama.cpp or "
    "LM Studio pass --helmbench-api openai with its --helmbench-base-url)"
)


def say(state: HelmbenchState, lines: Iterable[str]) -> None:
    """Each line in the terminal (pytest's own writer), or in the log when there is no terminal."""
    terminal = state.config.pluginmanager.get_plugin("terminalreporter")
    for line in lines:
        if terminal is not None:
            terminal.write_line(for_terminal(line))
        else:
            log.warning("%s", line)


def dry_run_lines(state: HelmbenchState) -> list[str]:
    """One line per reason when any model of the session is a dry run; none otherwise."""
    settings = state.settings
    if settings.dry_run:
        return [f"HELMBench: dry run — {_flag_source(state)}: {SAYS_NOTHING_SENT}"]
    dry = [model for model in settings.model_ids if state.is_dry_run(model)]
    if not dry:
        return []
    by_variable: dict[str, list[str]] = {}
    for model in dry:
        variable = settings.missing_key(settings.model(model)) or KEY_ENV
        by_variable.setdefault(variable, []).append(model)
    everything = len(dry) == len(settings.model_ids)
    lines = []
    for variable, models in by_variable.items():
        why = (
            f"{variable} is not set"
            if variable == KEY_ENV
            else f"{variable} (api_key_env in models.yml) is not set"
        )
        hint = KEYLESS_HINT if variable == KEY_ENV else ""
        if everything and len(by_variable) == 1:
            lines.append(f"HELMBench: dry run — {why}: {SAYS_NOTHING_SENT}{hint}")
        else:
            lines.append(
                f"HELMBench: dry run for {', '.join(models)} — {why}: their cases are composed and "
                f"validated, nothing is sent for them{hint}"
            )
    return lines


def family_lines(state: HelmbenchState) -> list[str]:
    """One warning per model judged by a judge of its own provider family (the id before `/`)."""
    settings = state.settings
    found = (family_warning(model, settings.judge_ids) for model in settings.model_ids)
    return [f"HELMBench: {line}" for line in found if line]


def _flag_source(state: HelmbenchState) -> str:
    source = option_source(state.config, option_named("dry-run"))
    if source is OptionSource.ENV:
        return "HELMBENCH_DRY_RUN is set"
    if source is OptionSource.INI:
        where = state.config.inipath.name if state.config.inipath else "the ini file"
        return f"helmbench_dry_run is set in {where}"
    return "--helmbench-dry-run given"


def workers_note(state: HelmbenchState, notices: list[str]) -> list[str]:
    """Under -n, each worker makes one call at a time, whatever a server's slots: said with them."""
    workers = getattr(state.config.option, "numprocesses", None)
    if not notices or not isinstance(workers, int) or workers < 2:
        return notices
    return [
        *notices,
        f"HELMBench: with -n {workers} each worker makes one call at a time, so up to {workers} reach a "
        "server at once: more than its slots only queue there (--helmbench-concurrency alone respects them)",
    ]
