"""Reading input: YAML and JSON documents with positions, files and directories, Helm and
kustomize rendering, and telling Kubernetes objects from other documents. Knows nothing of the
policy, the engine, the rules or suppressions."""
