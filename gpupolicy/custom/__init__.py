"""Custom rules: a team's own checks in Rego or CEL, its Gatekeeper ConstraintTemplates and
Constraints, and its Kubernetes ValidatingAdmissionPolicies, run as gpupolicy rules.

This layer sits beside gpupolicy/rules/: it turns what it loads into engine `Rule`s
(gpupolicy/custom/rules.py). The Rego and CEL engines are imported only when a custom rule of
their language is loaded: linting without custom rules never imports them.
"""
