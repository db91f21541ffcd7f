"""The --helmbench-* options as pytest sees them: registration, and the one precedence rule.

Every option has an ini twin and, mostly, an environment variable; a value is read from the
command line, then the environment, then the ini file, then the option's default.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from .config import OPTIONS, Option, env_flag


def option_dest(name: str) -> str:
    """`max-cost` -> `helmbench_max_cost`: the argparse destination and the ini name."""
    return "helmbench_" + name.replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    """Each option as a flag in the `helmbench` group plus its ini twin, and `helmbench_root`."""
    group = parser.getgroup("helmbench", "HELMBench mental-health safety benchmark")
    for option in OPTIONS:
        flag = f"--helmbench-{option.name}"
        text = option.help + (f" [env {option.env}]" if option.env else "")
        dest = option_dest(option.name)
        if option.kind == "bool":
            group.addoption(flag, action="store_true", default=None, dest=dest, help=text)
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
        "benchmark root folder, relative to the rootdir (default: benchmark)",
        default="benchmark",
    )


def option_value(config: pytest.Config, option: Option) -> Any:
    """Command line, then environment variable, then ini, then the default."""
    cli = config.getoption(option_dest(option.name), None)
    if cli not in (None, [], False):
        return cli
    if option.kind == "optional" and option.env and env_flag(os.environ.get(option.env, "")):
        return option.const
    env = os.environ.get(option.env, "") if option.env else ""
    if env.strip():
        if option.kind == "bool":
            return env_flag(env)
        return [env] if option.kind == "list" else env
    ini = config.getini(option_dest(option.name))
    if ini not in (None, "", [], False):
        return ini if option.kind != "list" else [ini]
    return option.default


def option_named(name: str) -> Option:
    return next(o for o in OPTIONS if o.name == name)
