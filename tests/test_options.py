"""Option precedence, for every kind of option: command line, then environment, then ini, then default.

Each test reads values through `option_value` from a real pytest Config (pytester.parseconfig), the
way the plugin does, so the registration (flags, ini twins) is checked along with the rule.
"""

from __future__ import annotations

import pytest

from pytest_helmbench.errors import ConfigError
from pytest_helmbench.plugin.options import OPTIONS, option_named, option_value


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


@pytest.mark.parametrize(
    ("env", "expected"), [("1", "latest"), ("true", "latest"), (" Yes ", "latest"), ("12", "12")]
)
def test_optional_env_flag_or_value_over_ini(pytester, monkeypatch, env: str, expected: str) -> None:
    ini(pytester, resume="3")
    monkeypatch.setenv("HELMBENCH_RESUME", env)
    assert value(pytester, "resume") == expected


@pytest.mark.parametrize("env", ["false", "0", "no", "off", "OFF", " False "])
def test_optional_env_off_words_mean_off_even_over_ini(pytester, monkeypatch, env: str) -> None:
    """HELMBENCH_RESUME=false used to be read as run id 'false'."""
    ini(pytester, resume="3")
    monkeypatch.setenv("HELMBENCH_RESUME", env)
    assert value(pytester, "resume") is None
    assert value(pytester, "resume", "--helmbench-resume=7") == "7"  # the command line still wins


@pytest.mark.parametrize(("text", "expected"), [("false", None), ("on", "latest"), ("latest", "latest")])
def test_optional_ini_follows_the_same_rule(pytester, text: str, expected: str | None) -> None:
    ini(pytester, retry_errors=text)
    assert value(pytester, "retry-errors") == expected


@pytest.mark.parametrize("env", ["maybe", "-1", "12a", "run 3"])
def test_an_unrecognised_optional_value_names_the_variable_and_the_accepted_values(
    pytester, monkeypatch, env: str
) -> None:
    monkeypatch.setenv("HELMBENCH_RESUME", env)
    with pytest.raises(ConfigError) as raised:
        value(pytester, "resume")
    message = str(raised.value)
    assert message.startswith(f"HELMBENCH_RESUME={env!r}")
    assert "run id" in message and "latest" in message
    assert "1, true, yes, on (on)" in message and "0, false, no, off (off)" in message


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.kind == "bool" and o.env])
@pytest.mark.parametrize(
    ("env", "expected"),
    [("1", True), ("TRUE", True), (" yes ", True), ("on", True), ("0", False), ("False", False)]
    + [("no", False), ("off", False)],
)
def test_every_boolean_env_twin_follows_one_rule(pytester, monkeypatch, option, env, expected) -> None:
    monkeypatch.setenv(option.env, env)
    assert option_value(pytester.parseconfig(), option) is expected


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.kind == "bool" and o.env])
@pytest.mark.parametrize("env", ["maybe", "2", "enabled", "y"])
def test_an_unrecognised_boolean_env_value_is_an_error_not_off(pytester, monkeypatch, option, env) -> None:
    """It used to be read as off: HELMBENCH_DRY_RUN=enabled sent every case."""
    monkeypatch.setenv(option.env, env)
    with pytest.raises(ConfigError) as raised:
        option_value(pytester.parseconfig(), option)
    assert str(raised.value) == (
        f"{option.env}={env!r} is not a yes/no value: use 1, true, yes, on (on) or 0, false, no, off (off)"
    )


def test_an_unreadable_ini_bool_is_a_config_error(pytester) -> None:
    ini(pytester, dry_run="perhaps")
    with pytest.raises(ConfigError, match="ini helmbench_dry_run: "):
        value(pytester, "dry-run")


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


def test_pytest_help_shows_every_option(pytester) -> None:
    """`pytest --help` crashed in every project with HELMBench installed: argparse formats help strings
    with %, and --helmbench-repeat's help says "95% Wilson" (found by the docs' option reference test)."""
    result = pytester.runpytest_subprocess("--help", "-p", "no:randomly")
    assert result.ret == 0, result.stderr.str()
    shown = " ".join(result.stdout.str().split())  # help text wraps at any space
    assert all(f"--helmbench-{option.name}" in shown for option in OPTIONS)
    assert "95% Wilson interval" in shown
