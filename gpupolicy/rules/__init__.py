"""The built-in rules. Importing this package registers every rule in `engine.REGISTRY`.

Each family lives in its own module; the list below is the explicit registry of modules
(a module not listed here is not loaded).
"""

from __future__ import annotations

import importlib

from gpupolicy.engine.registry import REGISTRY

RULE_MODULES = (
    "gpupolicy.rules.input",
    "gpupolicy.rules.api_versions",
    "gpupolicy.rules.suppression",
    "gpupolicy.rules.gpu_resources",
    "gpupolicy.rules.gpu_sharing",
    "gpupolicy.rules.security",
    "gpupolicy.rules.access",
    "gpupolicy.rules.supply_chain",
    "gpupolicy.rules.experiments",
    "gpupolicy.rules.rollback",
    "gpupolicy.rules.placement",
    "gpupolicy.rules.priority",
    "gpupolicy.rules.probes",
    "gpupolicy.rules.disruption",
)

for _module in RULE_MODULES:
    importlib.import_module(_module)

# Every built-in rule is declared: a policy naming any other rule (or a rule's unknown parameter) is refused.
REGISTRY.declarations.complete = True
