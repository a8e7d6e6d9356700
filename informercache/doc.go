// Package informercache owns what the autoscaler's informers keep of the
// objects they cache: the transform (Trimmer) that drops what no part of the
// autoscaler reads (managed fields; of pods, the kubelet-only container
// fields, statuses and readiness conditions) and makes the pods of a workload
// share their equal parts, bounded in bytes and swept of parts no cached pod
// holds any more. A newcomer asking "why does a cached pod lack its IPs"
// starts here.
//
// It imports only Kubernetes API types and client-go's cache; nothing of the
// autoscaler.
package informercache
