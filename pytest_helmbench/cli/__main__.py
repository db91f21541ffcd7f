"""`python -m pytest_helmbench.cli`: the `helmbench` command where its script is not on PATH."""

from . import main

if __name__ == "__main__":  # imported, as the test suite imports every module, it does nothing
    main()
