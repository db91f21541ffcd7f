"""Parse benchmark.yml: the benchmark's version, changelog, description, categories, styles, pillars,
behaviours and scoring weights (scoring_spec.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..codes import BEHAVIOUR_CODE
from ..errors import BenchmarkError
from .files import BenchmarkFiles
from .markdown import load_yaml
from .model import BehaviourInfo, BenchmarkInfo, PillarInfo, content_hash
from .scoring_spec import parse_weights
from .yaml_lines import YamlReader


def _str_map(value: Any, path: Path, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BenchmarkError(
            path,
            f"'{key}' must be a mapping of name: description",
            fix=f"write '{key}:' followed by indented 'NAME: description' lines",
        )
    return {str(k): str(v or "") for k, v in value.items()}


def _section(value: Any, path: Path, key: str) -> dict[str, dict[str, Any]]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise BenchmarkError(
            path,
            f"'{key}' must map each code to a mapping of fields",
            fix="see benchmark.yml in docs/reference/benchmark-files.md",
        )
    return {str(k): v for k, v in value.items()}


def _changelog(value: Any, version: str, path: Path) -> dict[str, tuple[str, ...]]:
    """`changelog:` maps each version to the list of what changed in it; the current version must be
    there (a new version without a word about what changed is a mistake)."""
    if value is None:
        return {}
    fix = f'write changelog: then an indented "{version}": and a list of "- what changed" lines'
    if not isinstance(value, dict):
        raise BenchmarkError(path, "'changelog' must map each version to a list of changes", fix=fix)
    found: dict[str, tuple[str, ...]] = {}
    for key, entries in value.items():
        if (
            not isinstance(entries, list)
            or not entries
            or not all(isinstance(e, str) and e.strip() for e in entries)
        ):
            raise BenchmarkError(path, f"changelog {key!r}: must be a non-empty list of texts", fix=fix)
        found[str(key)] = tuple(e.strip() for e in entries)
    if version not in found:
        raise BenchmarkError(path, f"the changelog has no entry for version {version}", fix=fix)
    return found


def parse_benchmark_info(path: Path, files: BenchmarkFiles | None = None) -> BenchmarkInfo:
    """Parse benchmark.yml; a missing file gives an empty description."""
    files = files or BenchmarkFiles(path.parent)
    if not files.is_file(path):
        return BenchmarkInfo("unversioned", "", {}, {}, {}, {}, content_hash("empty"), present=False)
    written = files.read_text(path)
    data = load_yaml(written, path) or {}
    if not isinstance(data, dict):
        raise BenchmarkError(
            path,
            "benchmark.yml must be a YAML mapping",
            fix="see docs/reference/benchmark-files.md (version, description, pillars, behaviours)",
        )
    pillars = {
        code: PillarInfo(code, str(v.get("name", code)), str(v.get("description", "")))
        for code, v in _section(data.get("pillars"), path, "pillars").items()
    }
    behaviours = {}
    for code, v in _section(data.get("behaviours"), path, "behaviours").items():
        if not BEHAVIOUR_CODE.fullmatch(code):
            raise BenchmarkError(
                path,
                f"behaviour key {code!r} is not a code like 'P1-B1'",
                fix="key each behaviour by its pillar and behaviour code, e.g. P1-B1",
            )
        threshold = v.get("threshold")
        if threshold is not None and not isinstance(threshold, (int, float)):
            raise BenchmarkError(
                path,
                f"behaviour {code}: threshold must be a number (a score 0-100)",
                fix="e.g. threshold: 80",
            )
        behaviours[code] = BehaviourInfo(
            code,
            str(v.get("title", code)),
            str(v.get("description", "")),
            str(v.get("compliance", "")),
            float(threshold) if threshold is not None else None,
        )
    version = str(data.get("version", "unversioned"))
    return BenchmarkInfo(
        version=version,
        description=str(data.get("description", "")),
        categories=_str_map(data.get("categories"), path, "categories"),
        styles=_str_map(data.get("styles"), path, "styles"),
        pillars=pillars,
        behaviours=behaviours,
        hash=content_hash(data),
        changelog=_changelog(data.get("changelog"), version, path),
        weights=parse_weights(data.get("weights"), path, YamlReader(path, written).line),
    )
