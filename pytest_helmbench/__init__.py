"""HELMBench: mental-health safety evaluation of LLMs as a pytest plugin."""

__version__ = "1.0.0"
