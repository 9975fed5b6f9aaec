"""The policy: policy files loaded, merged and validated, and the facts derived from them once
(node pools, the node-label registry, node constraints, cluster facts)."""
