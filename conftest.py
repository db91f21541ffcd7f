"""Root conftest, deliberately empty: the suite's `pytester` plugin is loaded by `addopts` in
pyproject.toml, because this file is also loaded when another folder's session collects the
benchmark of an editable install (benchmark_root.py), where `pytest_plugins` is refused."""
