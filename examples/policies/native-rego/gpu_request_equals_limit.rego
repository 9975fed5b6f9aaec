# A GPU container's request must equal its limit (what the built-in GP102 checks), as a native
# Rego rule: `input` is a Pod (or the pod template of a workload), `data.parameters` its parameters.
package acme.gpu_request_equals_limit

import rego.v1

metadata := {
	"id": "ACME001",
	"name": "gpu-request-equals-limit",
	"severity": "error",
	"summary": "A GPU container's request equals its limit.",
	"rationale": "Extended resources such as GPUs cannot be overcommitted: Kubernetes refuses a request that differs from the limit.",
	"remediation": "Set the GPU request equal to the GPU limit, or leave the request out.",
	"kinds": ["Pod"],
	"parameters": {"resource": "nvidia.com/gpu"},
}

violation contains {"msg": msg, "path": path} if {
	some i
	container := input.spec.containers[i]
	request := container.resources.requests[data.parameters.resource]
	limit := container.resources.limits[data.parameters.resource]
	units.parse(sprintf("%v", [request])) != units.parse(sprintf("%v", [limit]))
	msg := sprintf("container %v requests %v %v but its limit is %v", [container.name, request, data.parameters.resource, limit])
	path := ["spec", "containers", i, "resources", "requests", data.parameters.resource]
}
