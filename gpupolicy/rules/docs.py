"""Rule documentation generated from rule metadata and the rule's own examples.

Sections follow ruff's: What it does, Why is this bad?, Example, Use instead, Parameters (ruff's
Options: the policy keys the rule reads), References. The Example and Use instead blocks are the
rule's own test fixtures (`rules/examples/<ID>/fires.yaml`, `passes.yaml`), so every example in the
docs is run by the tests.

`python -m gpupolicy.rules.docs docs/rules` writes `docs/rules/<ID>-<name>.md`, `docs/rules/README.md`
and the `## Rules` section of README.md; `--check` writes nothing and exits 1 when any of them is
out of date (CI runs it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpupolicy.engine.registry import REGISTRY, Rule
from gpupolicy.kube.roles import NOT_AGENT, Role
from gpupolicy.rules.example_files import examples_for, strip_markers

DOCS_BASE_URL = "https://github.com/gpupolicy/gpupolicy/blob/main/docs/rules/"
SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Parameters", "References")
README_HEADING = "## Rules"


def _load_rules() -> list[Rule]:
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules)

    return list(REGISTRY)


def help_uri(rule: Rule) -> str:
    return f"{DOCS_BASE_URL}{rule.slug}.md"


def render_rule_page(rule: Rule) -> str:
    examples = examples_for(rule.id)
    fires = strip_markers(examples.fires.read_text(encoding="utf-8")) if examples else "(no example)\n"
    passes = strip_markers(examples.passes.read_text(encoding="utf-8")) if examples else "(no example)\n"
    policy = (
        f"With this policy (merged over the default):\n\n```yaml\n{examples.policy.read_text(encoding='utf-8')}```\n\n"
        if examples and examples.policy
        else ""
    )
    options = _parameters(rule)
    references = "\n".join(f"- <{ref}>" for ref in rule.references) or "None."
    return (
        f"# {rule.id} {rule.name}\n\n"
        f"Severity: **{rule.severity.label}** · Family: {rule.family} · Scope: {rule.scope.value}"
        f" · Applies to: {_roles(rule)}\n\n"
        f"## What it does\n\n{rule.summary}\n\n"
        f"## Why is this bad?\n\n{rule.rationale}\n\n"
        f"## Example\n\n{policy}```yaml\n{fires}```\n\n"
        f"## Use instead\n\n{rule.remediation}\n\n```yaml\n{passes}```\n\n"
        f"## Parameters\n\n{options}\n\n"
        f"## References\n\n{references}\n"
    )


def _parameters(rule: Rule) -> str:
    """The rule's own parameters (set with `rules: {<id or name>: {params: ...}}`), then the
    policy settings it reads that other rules share."""
    owned = [
        f"- `{param.name}` ({param.type_name}, default `{_yaml_value(param.default)}`): {param.doc}"
        + (f" Also set by the policy key `{param.setting}`; `params` wins." if param.setting else "")
        for param in rule.parameters
    ]
    read = [f"- `{setting.key}`: {setting.description}" for setting in rule.settings]
    parts = []
    if owned:
        example = f"rules: {{{rule.id}: {{params: {{{rule.parameters[0].name}: ...}}}}}}"
        parts.append(
            f"Set in the policy as `{example}` (the rule named by id or by name):\n\n" + "\n".join(owned)
        )
    if read:
        parts.append("Policy settings it reads:\n\n" + "\n".join(read))
    return "\n\n".join(parts) or "None."


def _yaml_value(value: object) -> str:
    """A default as a policy file writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(item) for item in value) + "]"
    return str(value)


def _roles(rule: Rule) -> str:
    """The workload roles the rule judges (gpupolicy/kube/roles.py: decided from evidence, not kind)."""
    if rule.roles is None:
        return "every workload" if rule.scope.value == "workload" else "the objects of its scope"
    if rule.roles == NOT_AGENT:
        return "every workload but node agents (the GPU stack's and the cluster's own)"
    names = [role.value for role in Role if role in rule.roles]
    return "workloads whose role is " + " or ".join(names)


def _markdown_table(rules: list[Rule], link_base: str) -> str:
    rows = [
        f"| [{r.id}]({link_base}{r.slug}.md) | {r.name} | {r.severity.label} | {r.remediation} |"
        for r in rules
    ]
    return "| id | name | severity | what to do |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"


def doc_problems(rule: Rule) -> list[str]:
    """What keeps a rule's documentation from being complete (the meta-test asks every rule)."""
    problems = [
        f"no {label} text" for label, text in (("What it does", rule.summary), ("Why is this bad?", rule.rationale))
        if not text.strip()
    ]  # fmt: skip
    if not rule.remediation.strip().endswith("."):
        problems.append("no remediation (one sentence ending with a period)")
    if not rule.references:
        problems.append("no references")
    examples = examples_for(rule.id)
    if examples is None:
        problems.append(f"no examples: add rules/examples/{rule.id}/fires.yaml and passes.yaml")
    page = render_rule_page(rule)
    problems.extend(
        f"page lacks the section {section!r}" for section in SECTIONS if f"\n## {section}\n" not in page
    )
    return problems


def render_rule_list(fmt: str, link_base: str = "") -> str:
    rules = _load_rules()
    if fmt == "json":
        return (
            json.dumps(
                [
                    {
                        "id": rule.id,
                        "name": rule.name,
                        "severity": rule.severity.label,
                        "scope": rule.scope.value,
                        "summary": rule.summary,
                        "remediation": rule.remediation,
                        "helpUri": help_uri(rule),
                    }
                    for rule in rules
                ],
                indent=2,
            )
            + "\n"
        )
    if fmt == "markdown":
        return _markdown_table(rules, link_base)
    width = max(len(rule.name) for rule in rules)
    return "".join(
        f"{rule.id}  {rule.severity.label:<7}  {rule.name:<{width}}  {rule.remediation}\n" for rule in rules
    )


def rendered_docs() -> dict[str, str]:
    """Every generated page of docs/rules/, by file name."""
    pages = {f"{rule.slug}.md": render_rule_page(rule) for rule in _load_rules()}
    pages["README.md"] = (
        "# Rules\n\n"
        "Generated from the rule metadata by `python -m gpupolicy.rules.docs docs/rules`; do not edit.\n\n"
        + render_rule_list("markdown")
    )
    return pages


def readme_section() -> str:
    return (
        f"{README_HEADING}\n\n"
        "Generated by `python -m gpupolicy.rules.docs` from `gpupolicy rules --format markdown`; "
        "`gpupolicy explain <ID>` shows a rule's page.\n\n" + render_rule_list("markdown", "docs/rules/")
    )


def with_readme_section(readme: str) -> str:
    """README.md with its `## Rules` section replaced (or appended at the end)."""
    section = readme_section()
    lines = readme.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == README_HEADING), None)
    if start is None:
        return readme.rstrip("\n") + "\n\n" + section if readme.strip() else section
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    tail = "".join(lines[end:])
    return "".join(lines[:start]) + section + ("\n" + tail if tail else "")


def write_docs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    pages = rendered_docs()
    for stale in folder.glob("GP*.md"):
        if stale.name not in pages:
            stale.unlink()
    written = []
    for name, text in pages.items():
        target = folder / name
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


def stale_docs(folder: Path, readme: Path | None = None) -> list[str]:
    """What `write_docs` (and the README update) would change; empty when up to date."""
    pages = rendered_docs()
    problems = []
    for name, text in pages.items():
        target = folder / name
        if not target.is_file():
            problems.append(f"{target}: missing")
        elif target.read_text(encoding="utf-8") != text:
            problems.append(f"{target}: out of date")
    problems.extend(
        f"{extra}: no such rule" for extra in sorted(folder.glob("GP*.md")) if extra.name not in pages
    )
    if readme is not None:
        current = readme.read_text(encoding="utf-8") if readme.is_file() else ""
        if with_readme_section(current) != current:
            problems.append(f"{readme}: the {README_HEADING} section is out of date")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    folders = [arg for arg in args if arg != "--check"]
    folder = Path(folders[0] if folders else "docs/rules")
    readme = folder.resolve().parent.parent / "README.md"
    if check:
        problems = stale_docs(folder, readme)
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("regenerate with: python -m gpupolicy.rules.docs docs/rules", file=sys.stderr)
        return 1 if problems else 0
    write_docs(folder)
    current = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    updated = with_readme_section(current)
    if updated != current:
        readme.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
