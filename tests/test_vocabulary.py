"""gpupolicy/core/vocabulary.py is the one place for the names gpupolicy shares with its users and its
deployment: what cannot import it (JSON schemas, the Helm chart) or keeps its own registry (the
output formats) is checked against it here, so that a mode, a format or a cluster kind added in
one place and not the others fails a test instead of a deployment."""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpupolicy.cli.main import build_parser
from gpupolicy.core import vocabulary
from gpupolicy.formats import load_formatters
from gpupolicy.kube.pod_spec import EXTRACTORS, WALKED_CUSTOM_RESOURCES
from gpupolicy.webhook import kinds
from gpupolicy.webhook.cluster_inventory import KINDS
from gpupolicy.webhook.settings import Mode
from tests.real_tools import needs_helm
from tests.test_chart import KIND_GROUPS, one, plural, render, webhook_of

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "gpupolicy"
CHART = REPO / "charts" / "gpupolicy"


# -- modes ------------------------------------------------------------------------------------------


def _mode_enums(schema: Any) -> Iterator[list[Any]]:
    """Every `enum` of a property named `mode`, anywhere in a JSON schema."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict) and "enum" in value.get("mode", {}):
                yield value["mode"]["enum"]
            yield from _mode_enums(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _mode_enums(item)


@pytest.mark.parametrize(
    "schema_file",
    [REPO / "policies" / "schemas" / "sections" / "webhook.json", CHART / "values.schema.json"],
    ids=["policy-schema", "chart-values-schema"],
)
def test_schema_mode_enums_are_the_vocabulary_modes(schema_file: Path) -> None:
    enums = list(_mode_enums(json.loads(schema_file.read_text(encoding="utf-8"))))
    assert len(enums) == 2, "the default mode and the namespace modes"  # found both, not none
    for enum in enums:
        assert enum == list(vocabulary.MODES)


def test_chart_default_mode_is_a_mode() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert values["mode"] in vocabulary.MODES


def _subcommand_option(command: str, dest: str) -> argparse.Action:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(action for action in subparsers.choices[command]._actions if action.dest == dest)


def test_serve_mode_choices_are_the_vocabulary_modes() -> None:
    assert tuple(_subcommand_option("serve", "mode").choices or ()) == vocabulary.MODES


def test_webhook_mode_enum_is_the_vocabulary_modes() -> None:
    assert tuple(Mode) == vocabulary.MODES
    with pytest.raises(ValueError, match="use enforce, warn or audit"):
        Mode.parse("deny")


# -- formats ----------------------------------------------------------------------------------------


def test_format_registry_is_the_vocabulary_formats() -> None:
    assert sorted(load_formatters()) == sorted(vocabulary.FORMATS)


def test_lint_format_help_names_every_format() -> None:
    help_text = _subcommand_option("lint", "format").help or ""
    assert help_text.startswith(vocabulary.format_help())
    for name in vocabulary.FORMATS:
        assert re.search(rf"\b{name}\b", help_text), name


# -- cluster kinds ----------------------------------------------------------------------------------


def _identity(kind: str, api_version: str, namespaced: bool, resource: str) -> tuple[str, str, bool, str]:
    return kind, api_version, namespaced, resource


def test_cluster_inventory_caches_the_vocabulary_cached_kinds() -> None:
    inventory = [_identity(s.kind, s.api_version, s.namespaced, s.plural) for s in KINDS]
    cached = [_identity(k.kind, k.api_version, k.namespaced, k.plural) for k in vocabulary.CACHED_KINDS]
    assert inventory == cached


def test_cross_object_kinds_are_the_vocabulary_admitted_kinds() -> None:
    assert kinds.CROSS_OBJECT_KINDS is vocabulary.CROSS_OBJECT_KINDS
    assert {"ConfigMap", "PodDisruptionBudget", "Rollout"} <= kinds.CROSS_OBJECT_KINDS


def test_cluster_kind_names_are_unique() -> None:
    names = [entry.kind for entry in vocabulary.CLUSTER_KINDS]
    assert len(names) == len(set(names))
    assert len({(entry.group, entry.plural) for entry in vocabulary.CLUSTER_KINDS}) == len(names)


def _grants(role: dict[str, Any], verb: str) -> set[tuple[str, str]]:
    return {
        (group, resource)
        for rule in role["rules"]
        if verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


@needs_helm
def test_chart_rbac_lists_and_watches_exactly_the_cached_kinds() -> None:
    role = one(render(), "ClusterRole")
    cached = {(entry.group, entry.plural) for entry in vocabulary.CACHED_KINDS}
    assert _grants(role, "list") == cached
    assert _grants(role, "watch") == cached


@needs_helm
def test_chart_webhook_rules_send_exactly_the_workloads_and_the_admitted_kinds() -> None:
    hook = webhook_of(render())
    sent = {
        (group, resource)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    workloads = {(KIND_GROUPS[kind], plural(kind)) for kind in EXTRACTORS} | WALKED_CUSTOM_RESOURCES
    admitted = {(entry.group, entry.plural) for entry in vocabulary.CLUSTER_KINDS if entry.admitted}
    assert sent == workloads | admitted


# -- gpupolicy.io names -----------------------------------------------------------------------------

# A `gpupolicy.io/` name spelled as a name: the whole string, or inside one after a quote or a
# bracket (a key in a path such as `metadata.annotations["gpupolicy.io/model"]`) or after `: ` (a
# YAML value). Prose that mentions a label (a rule summary, a message) may spell it.
SPELLED_NAME = re.compile(r"""(?:^|["'\[]|: )gpupolicy\.io/""")


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def spelled_names(source: str) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and SPELLED_NAME.search(node.value)
    ]


def test_the_scan_finds_a_spelled_name() -> None:
    """The check below would catch the duplicates it replaced."""
    source = '''"""A docstring may say gpupolicy.io/arm."""
EXPERIMENT_LABEL = "gpupolicy.io/experiment"  # a comment may say "gpupolicy.io/arm"
PATH = 'metadata.annotations["gpupolicy.io/model"]'
HELP = "label it gpupolicy.io/experiment"
'''
    assert [line for line, _ in spelled_names(source)] == [2, 3]


def test_only_the_vocabulary_spells_gpupolicy_io_names() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{line}: {value[:60]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != PACKAGE / "core" / "vocabulary.py"
        for line, value in spelled_names(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "import these from gpupolicy.core.vocabulary:\n" + "\n".join(offenders)


def test_vocabulary_imports_nothing_from_gpupolicy() -> None:
    tree = ast.parse((PACKAGE / "core" / "vocabulary.py").read_text(encoding="utf-8"))
    imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)] + [
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    ]
    assert not [name for name in imported if name.split(".")[0] == "gpupolicy"]
