"""The built-in rules. Importing this package registers every rule in `engine.REGISTRY`.

Each family lives in its own module; the list below is the explicit registry of modules
(a module not listed here is not loaded).
"""

from __future__ import annotations

import importlib

RULE_MODULES = (
    "gpupolicy.rules.input",
    "gpupolicy.rules.gpu_resources",
    "gpupolicy.rules.gpu_sharing",
)

for _module in RULE_MODULES:
    importlib.import_module(_module)
