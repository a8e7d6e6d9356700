// Package heapgovernor sets the Go runtime's soft memory limit from the live
// heap (--heap-headroom-ratio): after each collection the limit is the live
// heap plus a share of it (at least 64 MiB) plus the runtime's own memory,
// capped below a cgroup memory limit. GOGC or GOMEMLIMIT in the environment
// turn it off. "Who sets the soft memory limit" is answered here.
//
// It imports only the standard library and klog; nothing of the autoscaler.
package heapgovernor
