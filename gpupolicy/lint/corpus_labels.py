"""The labelled corpus (tests/data/corpus/): real manifests with `# expect:` and `# forbid:` comments
saying what an experienced GPU platform engineer would and would not want to hear on an unknown
cluster. `check_file` compares the linter's findings with the labels; `python -m
gpupolicy.lint.corpus_labels DIR` prints precision and findings per object, per rule (docs/accuracy.md).

- `# expect: GP702, GP612` at the end of a line: a finding of each rule, at warning or error,
  points at that line.
- `# forbid: GP601, GP606` on a line of its own: no finding of those rules, at any severity, in the
  YAML document where it stands.
- Every finding at warning or error must sit on a line that expects its rule; info is free unless
  forbidden.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
from gpupolicy.core.findings import Finding, Severity
from gpupolicy.core.immutable import immutable
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.loading.inputs import load_file
from gpupolicy.policy.loading import Policy, default_policy

EXPECT = "# expect:"
FORBID = "# forbid:"


@dataclass(slots=True)
class Labels:
    expected: dict[int, set[str]] = field(default_factory=dict)  # line -> rule ids
    forbidden: dict[int, set[str]] = field(default_factory=dict)  # document index -> rule ids
    document_starts: list[int] = field(default_factory=list)  # first line of each document (1-based)

    def document_of(self, line: int) -> int:
        index = 0
        for number, start in enumerate(self.document_starts):
            if start <= line:
                index = number
        return index


def _rule_ids(text: str) -> set[str]:
    return {part.strip() for part in text.split(",") if part.strip()}


def parse_labels(text: str) -> Labels:
    labels = Labels(document_starts=[1])
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped == "---" or stripped.startswith("--- "):
            labels.document_starts.append(number)
            continue
        if stripped.startswith(FORBID):
            document = len(labels.document_starts) - 1
            labels.forbidden.setdefault(document, set()).update(_rule_ids(stripped[len(FORBID) :]))
            continue
        at = line.rfind(EXPECT)
        if at > 0 and not stripped.startswith("#"):
            labels.expected.setdefault(number, set()).update(_rule_ids(line[at + len(EXPECT) :]))
    return labels


@immutable
class Mismatch:
    kind: str  # "unexpected", "missing" or "forbidden"
    rule_id: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.kind} {self.rule_id}: {self.message}"


def loud(finding: Finding) -> bool:
    return finding.severity >= Severity.WARNING


def compare(
    findings: Sequence[Finding], labels: Labels, spans: dict[Finding, int] | None = None
) -> list[Mismatch]:
    """`spans` gives the last line of a finding's field when it spans several lines (a quoted or
    block scalar, where no comment can stand): a label on any of its lines counts."""
    mismatches: list[Mismatch] = []
    hit: set[tuple[int, str]] = set()
    for finding in findings:
        line = finding.line or 1
        if loud(finding):
            last = (spans or {}).get(finding, line)
            labelled = next(
                (n for n in range(line, last + 1) if finding.rule_id in labels.expected.get(n, set())), None
            )
            if labelled is not None:
                hit.add((labelled, finding.rule_id))
            else:
                mismatches.append(Mismatch("unexpected", finding.rule_id, line, finding.message))
        if finding.rule_id in labels.forbidden.get(labels.document_of(line), set()):
            mismatches.append(Mismatch("forbidden", finding.rule_id, line, finding.message))
    for line, rule_ids in sorted(labels.expected.items()):
        for rule_id in sorted(rule_ids - {r for (n, r) in hit if n == line}):
            mismatches.append(Mismatch("missing", rule_id, line, "labelled, not reported"))
    return mismatches


def check_file(path: Path, policy: Policy | None = None) -> tuple[Report, list[Mismatch]]:
    loaded = load_file(path)
    report = evaluate(
        loaded.resources, policy or default_policy(), problems=loaded.problems, directives=loaded.directives
    )
    labels = parse_labels(path.read_text(encoding="utf-8"))
    by_document = {resource.doc_index: resource for resource in loaded.resources}
    spans: dict[Finding, int] = {}
    for finding in report.findings:
        resource = by_document.get(finding.doc_index) if finding.doc_index is not None else None
        last = resource.last_line(finding.path) if resource is not None else None
        if last is not None and finding.line is not None and last > finding.line:
            spans[finding] = last
    return report, compare(report.findings, labels, spans)


@dataclass(slots=True)
class Tally:
    objects: int = 0
    loud: int = 0
    right: int = 0
    per_rule: collections.Counter[str] = field(default_factory=collections.Counter)
    right_per_rule: collections.Counter[str] = field(default_factory=collections.Counter)
    missing_per_rule: collections.Counter[str] = field(default_factory=collections.Counter)
    errors_unexpected: int = 0


def tally(files: Iterable[Path], policy: Policy | None = None) -> Tally:
    total = Tally()
    for path in files:
        report, mismatches = check_file(path, policy)
        total.objects += report.objects
        wrong = {(m.line, m.rule_id) for m in mismatches if m.kind == "unexpected"}
        for finding in report.findings:
            if not loud(finding):
                continue
            total.loud += 1
            total.per_rule[finding.rule_id] += 1
            if ((finding.line or 1), finding.rule_id) not in wrong:
                total.right += 1
                total.right_per_rule[finding.rule_id] += 1
            elif finding.severity is Severity.ERROR:
                total.errors_unexpected += 1
        for mismatch in mismatches:
            if mismatch.kind == "missing":
                total.missing_per_rule[mismatch.rule_id] += 1
    return total


def render(total: Tally) -> str:
    objects = max(total.objects, 1)
    precision = total.right / total.loud if total.loud else 1.0
    lines = [
        f"objects: {total.objects}; findings at warning or error: {total.loud} "
        f"({total.loud / objects:.2f} per object); labelled right: {total.right} (precision {precision:.0%}); "
        f"unlabelled errors: {total.errors_unexpected}; labels not reported: {sum(total.missing_per_rule.values())}",
        "",
        "| rule | findings | right | precision | labels missed |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for rule_id in sorted(set(total.per_rule) | set(total.missing_per_rule)):
        found, right = total.per_rule[rule_id], total.right_per_rule[rule_id]
        share = f"{right / found:.0%}" if found else "–"
        lines.append(f"| {rule_id} | {found} | {right} | {share} | {total.missing_per_rule[rule_id]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--json", action="store_true", help="the tally as JSON")
    args = parser.parse_args(argv)
    files = sorted(p for p in args.folder.iterdir() if p.suffix in (".yaml", ".yml"))
    total = tally(files)
    if args.json:
        print(
            json.dumps(
                {
                    "objects": total.objects,
                    "loud": total.loud,
                    "right": total.right,
                    "errorsUnexpected": total.errors_unexpected,
                    "perRule": {
                        rule_id: {
                            "findings": total.per_rule[rule_id],
                            "right": total.right_per_rule[rule_id],
                            "missed": total.missing_per_rule[rule_id],
                        }
                        for rule_id in sorted(set(total.per_rule) | set(total.missing_per_rule))
                    },
                },
                indent=1,
            )
        )
    else:
        print(render(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
