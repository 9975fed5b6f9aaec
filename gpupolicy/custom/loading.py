"""Finding and compiling custom rules: from the policy's `customRules.paths`, a repository's
`policies/rego/`, and the definitions that sit in the linted tree (a GitOps repository that keeps
its Gatekeeper constraints and ValidatingAdmissionPolicies beside its workloads).

Compiled once per policy load (`rules_for`), never per object. Nothing here imports a Rego or CEL
engine: the language modules do, when a rule of theirs is compiled.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import Source, load_file
from gpupolicy.policy.loading import FACTS_SOURCE, Policy

if TYPE_CHECKING:
    from gpupolicy.custom.definitions import CustomRule

REPO_REGO_FOLDER = Path("policies") / "rego"
YAML_SUFFIXES = (".yaml", ".yml")
# Folders of rule paths that hold a rule's examples (`gpupolicy test`), not rules.
EXAMPLES_FOLDER = "examples"
# What a manifest must contain to be looked at for definitions (a quick look at its text).
DEFINITION_MARKERS = ("gatekeeper.sh", "ValidatingAdmissionPolicy", "kind: CustomRule")


def rule_paths(policy: Policy) -> list[Path]:
    """`customRules.paths`, relative to the policy file that names them, and the `policies/rego/`
    folder beside each repository policy file of the policy."""
    sources = [source for source in policy.sources if source != FACTS_SOURCE]
    found: list[Path] = []
    for source, layer in reversed(list(zip(sources, policy.layers, strict=False))):
        section = layer.get("customRules") if isinstance(layer, dict) else None
        if isinstance(section, dict) and "paths" in section:
            base = _folder_of(source)
            found = [base / str(item) for item in as_list(section.get("paths"))]
            break
    for source in sources:
        if source.startswith("<"):
            continue
        folder = _folder_of(source) / REPO_REGO_FOLDER
        if folder.is_dir() and folder not in found:
            found.append(folder)
    return found


def _folder_of(source: str) -> Path:
    return Path.cwd() if source.startswith("<") else Path(source).parent


def rule_files(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """The `.rego` files and the YAML files under `paths` (tests and examples left out)."""
    rego: list[Path] = []
    yaml_files: list[Path] = []
    for path in paths:
        if not path.exists():
            raise CustomRuleError(str(path), 1, "customRules.paths names a path that does not exist")
        candidates = [path] if path.is_file() else sorted(_walk(path))
        for candidate in candidates:
            if candidate.suffix == ".rego" and not candidate.name.endswith("_test.rego"):
                rego.append(candidate)
            elif candidate.suffix in YAML_SUFFIXES:
                yaml_files.append(candidate)
    return rego, yaml_files


def _walk(folder: Path) -> Iterable[Path]:
    for path in folder.iterdir():
        if path.name.startswith(".") or path.name == EXAMPLES_FOLDER:
            continue
        if path.is_dir():
            yield from _walk(path)
        elif path.is_file():
            yield path


# The language modules are imported where a definition is read or compiled: a lint run whose
# policy names no rule path and whose tree holds no definition imports none of them.


def is_definition(resource: Resource) -> bool:
    from gpupolicy.custom.cel_rules import is_cel_definition
    from gpupolicy.custom.gatekeeper import is_constraint, is_template

    return is_template(resource) or is_constraint(resource) or is_cel_definition(resource)


def definitions_in(files: Iterable[Path]) -> list[Resource]:
    found: list[Resource] = []
    for path in files:
        loaded = load_file(path)
        if loaded.problems:
            problem = loaded.problems[0]
            raise CustomRuleError(problem.file or str(path), problem.line or 1, problem.message)
        found.extend(resource for resource in loaded.resources if is_definition(resource))
    return found


def definitions_in_sources(sources: Iterable[Source]) -> list[Resource]:
    """The definitions among the linted inputs (files only: a chart or overlay renders workloads).
    One written again unchanged — the same object in two variants of an installer, as Volcano ships
    `volcano-development-vap.yaml` and `volcano-development-vap-map.yaml` — is one definition."""
    found: list[Resource] = []
    first: dict[tuple[str, str, str | None, str], object] = {}
    for source in sources:
        if source.rendered or source.problem is not None:
            continue
        text = source.peek()
        if not text or not any(marker in text for marker in DEFINITION_MARKERS):
            continue
        for resource in source.load().resources:
            if not is_definition(resource):
                continue
            api_version = str(as_mapping(resource.obj).get("apiVersion", ""))
            identity = (api_version, resource.kind, resource.namespace, resource.name)
            earlier = first.setdefault(identity, resource.obj)
            if earlier is not resource.obj and earlier == resource.obj:
                continue
            found.append(resource)
    return found


def compile_rules(
    rego_files: Sequence[Path], definitions: Sequence[Resource], tree: Sequence[Resource] = ()
) -> list[CustomRule]:
    """The rules of `rego_files`, of `definitions` (the policy's rule paths: an error stops the
    run) and of `tree` (the linted tree's: a policy or template that cannot be compiled is
    reported on itself, gpupolicy/custom/unevaluated.py)."""
    from gpupolicy.custom.cel_rules import cel_rules
    from gpupolicy.custom.gatekeeper import gatekeeper_rules
    from gpupolicy.custom.native_rego import load_rego_rules

    rules = load_rego_rules(rego_files) if rego_files else []
    if definitions or tree:
        from_tree = {id(resource) for resource in tree}

        def tolerated(resource: Resource) -> bool:
            return id(resource) in from_tree

        every = [*definitions, *tree]
        rules.extend(gatekeeper_rules(every, tolerated))
        rules.extend(cel_rules(every, tolerated))
    return rules


def rules_for(policies: Iterable[Policy], tree: Sequence[Resource] = ()) -> list[CustomRule]:
    """Every custom rule of these policies' paths (each path read once) and of `tree`."""
    paths = list(dict.fromkeys(path.resolve() for policy in policies for path in rule_paths(policy)))
    if not paths and not tree:
        return []
    rego_files, yaml_files = rule_files(paths)
    return compile_rules(rego_files, definitions_in(yaml_files), tree)


# A custom rule and the policies (by `id`) under which it runs: those of the scope whose paths or
# linted files define it.
ScopedRule = tuple["CustomRule", frozenset[int]]


def rules_for_scopes(scopes: Sequence[tuple[Policy, Sequence[Source]]]) -> list[ScopedRule]:
    """The custom rules of each group of a run (a policy and the inputs it governs, context
    included): a rule defined in the tree runs on the files of its own scope only, as the other
    groups of a run are judged by other policies (gpupolicy/lint/scopes.py)."""
    found: dict[tuple[str, int], tuple[CustomRule, set[int]]] = {}
    for policy, sources in scopes:
        for rule in rules_for([policy], definitions_in_sources(sources)):
            origin = rule.metadata.origin
            entry = found.setdefault((origin.file, origin.line), (rule, set()))
            entry[1].add(id(policy))
    return [(rule, frozenset(policies)) for rule, policies in found.values()]
