// Package kwok is a cloud provider that simulates a cloud on a real cluster
// whose kubelets are faked by kwok. Node groups come from a YAML config;
// IncreaseSize creates instances in the provider's state, and a worker pool
// creates their Node objects after the group's registration delay, at a
// bounded rate; deleting an instance deletes its Node. Fault knobs per group
// (creation failures, partial failures of increases, an out-of-capacity
// limit, instances that never register or are listed late, foreign provider
// IDs, API errors and lost responses) make the autoscaler's failure handling
// testable. Instances that have not registered are persisted in a ConfigMap;
// registered ones are derived from the Node objects, so the state survives an
// autoscaler restart. Each Node carries a hash of the template it was made
// from (TemplateHashAnnotation): a group reports a Node whose hash differs
// from its current template's as drifted (drift.go); the config is read at
// start, so templates change when the autoscaler restarts with another one.
package kwok
