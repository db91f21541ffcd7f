"""Option precedence, for every kind of option: command line, then environment, then ini, then default.

Each test reads values through `option_value` from a real pytest Config (pytester.parseconfig), the
way the plugin does, so the registration (flags, ini twins) is checked along with the rule.
"""

from __future__ import annotations

import pytest

from pytest_helmbench.options import OPTIONS, option_named, option_value


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in OPTIONS:
        if option.env:
            monkeypatch.delenv(option.env, raising=False)


def value(pytester: pytest.Pytester, name: str, *args: str) -> object:
    return option_value(pytester.parseconfig(*args), option_named(name))


def ini(pytester: pytest.Pytester, **values: str) -> None:
    pytester.makeini("[pytest]\n" + "".join(f"helmbench_{k} = {v}\n" for k, v in values.items()))


# --- a string option (--helmbench-api, HELMBENCH_API, helmbench_api, default "openrouter") ---------


def test_string_default(pytester) -> None:
    assert value(pytester, "api") == "openrouter"


def test_string_ini_over_default(pytester) -> None:
    ini(pytester, api="openai")
    assert value(pytester, "api") == "openai"


def test_string_env_over_ini(pytester, monkeypatch) -> None:
    ini(pytester, api="openai")
    monkeypatch.setenv("HELMBENCH_API", "env-api")
    assert value(pytester, "api") == "env-api"


def test_string_cli_over_env(pytester, monkeypatch) -> None:
    ini(pytester, api="openai")
    monkeypatch.setenv("HELMBENCH_API", "env-api")
    assert value(pytester, "api", "--helmbench-api=cli-api") == "cli-api"


def test_blank_env_is_no_value(pytester, monkeypatch) -> None:
    ini(pytester, api="openai")
    monkeypatch.setenv("HELMBENCH_API", "  ")
    assert value(pytester, "api") == "openai"


def test_an_option_named_differently_in_the_environment(pytester, monkeypatch) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", "http://127.0.0.1:9/v1")
    assert value(pytester, "base-url") == "http://127.0.0.1:9/v1"
    assert value(pytester, "base-url", "--helmbench-base-url=http://x/v1") == "http://x/v1"


# --- a bool flag (--helmbench-dry-run) -----------------------------------------------------------


def test_bool_default_is_false(pytester) -> None:
    assert value(pytester, "dry-run") is False


def test_bool_ini(pytester) -> None:
    ini(pytester, dry_run="true")
    assert value(pytester, "dry-run") is True


@pytest.mark.parametrize(("env", "expected"), [("1", True), ("yes", True), ("0", False), ("off", False)])
def test_bool_env_over_ini(pytester, monkeypatch, env: str, expected: bool) -> None:
    ini(pytester, dry_run="true" if not expected else "false")
    monkeypatch.setenv("HELMBENCH_DRY_RUN", env)
    assert value(pytester, "dry-run") is expected


def test_bool_cli_over_env(pytester, monkeypatch) -> None:
    monkeypatch.setenv("HELMBENCH_DRY_RUN", "0")
    assert value(pytester, "dry-run", "--helmbench-dry-run") is True


# --- a list option (--helmbench-model, repeatable) ------------------------------------------------


def test_list_default(pytester) -> None:
    assert value(pytester, "model") is None


def test_list_ini(pytester) -> None:
    ini(pytester, model="ini/a,ini/b")
    assert value(pytester, "model") == ["ini/a,ini/b"]


def test_list_env_over_ini(pytester, monkeypatch) -> None:
    ini(pytester, model="ini/a")
    monkeypatch.setenv("HELMBENCH_MODEL", "env/a")
    assert value(pytester, "model") == ["env/a"]


def test_list_cli_repeated_over_env(pytester, monkeypatch) -> None:
    monkeypatch.setenv("HELMBENCH_MODEL", "env/a")
    assert value(pytester, "model", "--helmbench-model=cli/a", "--helmbench-model", "cli/b") == [
        "cli/a",
        "cli/b",
    ]


# --- an optional-value flag (--helmbench-resume[=RUN_ID]) -----------------------------------------


def test_optional_default(pytester) -> None:
    assert value(pytester, "resume") is None


def test_optional_ini(pytester) -> None:
    ini(pytester, resume="12")
    assert value(pytester, "resume") == "12"


@pytest.mark.parametrize(("env", "expected"), [("1", "latest"), ("true", "latest"), ("12", "12")])
def test_optional_env_flag_or_value_over_ini(pytester, monkeypatch, env: str, expected: str) -> None:
    ini(pytester, resume="3")
    monkeypatch.setenv("HELMBENCH_RESUME", env)
    assert value(pytester, "resume") == expected


@pytest.mark.parametrize(
    ("args", "expected"), [(["--helmbench-resume"], "latest"), (["--helmbench-resume=7"], "7")]
)
def test_optional_cli_over_env(pytester, monkeypatch, args: list[str], expected: str) -> None:
    monkeypatch.setenv("HELMBENCH_RESUME", "12")
    assert value(pytester, "resume", *args) == expected


def test_every_option_has_a_flag_and_an_ini_twin(pytester) -> None:
    config = pytester.parseconfig()
    for option in OPTIONS:
        assert option_value(config, option) == option.default, option.name
