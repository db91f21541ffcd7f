"""Root conftest: the project's own test suite drives pytest sessions through `pytester`."""

pytest_plugins = ["pytester"]
