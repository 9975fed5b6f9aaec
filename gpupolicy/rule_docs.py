"""Rule documentation generated from rule metadata and the rule's own examples.

Sections follow ruff's: What it does, Why is this bad?, Example, Use instead, Options, References.
`docs/rules/<ID>-<name>.md` are written by `python -m gpupolicy.rule_docs docs/rules`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpupolicy.engine import REGISTRY, Rule
from gpupolicy.rule_examples import examples_for, strip_markers

DOCS_BASE_URL = "https://github.com/gpupolicy/gpupolicy/blob/main/docs/rules/"
SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead", "Options", "References")


def _load_rules() -> list[Rule]:
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules)

    return list(REGISTRY)


def help_uri(rule: Rule) -> str:
    return f"{DOCS_BASE_URL}{rule.slug}.md"


def render_rule_page(rule: Rule) -> str:
    examples = examples_for(rule.id)
    fires = strip_markers(examples.fires.read_text(encoding="utf-8")) if examples else "(no example)\n"
    passes = strip_markers(examples.passes.read_text(encoding="utf-8")) if examples else "(no example)\n"
    options = "\n".join(f"- `{param.name}`: {param.description}" for param in rule.parameters) or "None."
    references = "\n".join(f"- <{ref}>" for ref in rule.references) or "None."
    return (
        f"# {rule.id} {rule.name}\n\n"
        f"Severity: **{rule.severity.label}** · Family: {rule.family} · Scope: {rule.scope.value}\n\n"
        f"## What it does\n\n{rule.summary}\n\n"
        f"## Why is this bad?\n\n{rule.rationale}\n\n"
        f"## Example\n\n```yaml\n{fires}```\n\n"
        f"## Use instead\n\n{rule.remediation}\n\n```yaml\n{passes}```\n\n"
        f"## Options\n\n{options}\n\n"
        f"## References\n\n{references}\n"
    )


def render_rule_list(fmt: str) -> str:
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
        rows = [f"| [{r.id}]({r.slug}.md) | {r.name} | {r.severity.label} | {r.remediation} |" for r in rules]
        return "| id | name | severity | what to do |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n"
    width = max(len(rule.name) for rule in rules)
    return "".join(
        f"{rule.id}  {rule.severity.label:<7}  {rule.name:<{width}}  {rule.remediation}\n" for rule in rules
    )


def write_docs(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stale in folder.glob("GP*.md"):
        stale.unlink()
    for rule in _load_rules():
        target = folder / f"{rule.slug}.md"
        target.write_text(render_rule_page(rule), encoding="utf-8")
        written.append(target)
    (folder / "README.md").write_text("# Rules\n\n" + render_rule_list("markdown"), encoding="utf-8")
    return written


if __name__ == "__main__":
    write_docs(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules"))
