"""The Kubernetes and GPU model: pod templates, GPU resources, scheduling, probes, pod security,
images, workload roles, disruption, experiments, rollback criteria and the bundle inventory.
Reads objects; knows nothing of the policy file, the engine or the rules."""
