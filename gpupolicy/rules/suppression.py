"""GP010-GP011: problems with suppressions themselves.

A suppression is a claim that a finding does not apply, so it must carry its reason, name rules
that exist, be allowed by the policy, and still match something. These two ids live outside the
rule catalogue's families (GP0xx input is GP001-GP005): the problems come from the suppressions
pass (`gpupolicy.engine.suppressions`), which the engine runs after the rules and whose problems it
makes findings of these rules, so they have no check function.
"""

from __future__ import annotations

from gpupolicy.engine.registry import Setting, input_rule

SUPPRESSION_DOCS = "https://github.com/gpupolicy/gpupolicy/blob/main/docs/suppressions.md"

input_rule(
    id="GP010",
    name="suppression-invalid",
    severity="error",
    summary="Reports a suppression that cannot be honoured: a `gpupolicy.io/ignore` annotation entry or a "
    "`# gpupolicy: ignore` comment without a reason, one that names an unknown rule, one for a rule the "
    "policy forbids suppressing in manifests (`suppressions.forbidden`), a suppression kind the policy "
    "switched off, and a policy exemption that has expired or names an unknown rule. The finding it "
    "meant to hide is still reported.",
    rationale="A suppression without a reason cannot be reviewed, a misspelt rule id silently hides "
    "nothing, and a pod that exempts itself from `privileged-container` defeats the policy. An "
    "exemption past its date is a decision nobody renewed.",
    remediation="Give the suppression a reason naming an existing rule, or remove it and fix the finding.",
    references=(SUPPRESSION_DOCS,),
    settings=(
        Setting("suppressions.annotations", "Whether objects may suppress with gpupolicy.io/ignore."),
        Setting("suppressions.comments", "Whether manifests may suppress with # gpupolicy: ignore."),
        Setting("suppressions.forbidden", "Rules that annotations and comments may not suppress."),
        Setting("exemptions", "Policy exemptions, each with owner, reason and expires."),
    ),
)

input_rule(
    id="GP011",
    name="suppression-unused",
    severity="warning",
    summary="Reports a `gpupolicy.io/ignore` annotation entry or a `# gpupolicy: ignore` comment that "
    "matched no finding. Policy exemptions are not reported: one run sees only part of what they cover.",
    rationale="A stale suppression outlives the problem it hid and will silently hide the next, "
    "different problem of the same rule on that object.",
    remediation="Remove the suppression, or point it at the rule and container that still need it.",
    references=(SUPPRESSION_DOCS,),
)
