// Package heapgovernor sets the Go collector's target percentage from the
// live heap (--heap-headroom-ratio): after each collection the heap may grow
// by a share of its live part (at least 64 MiB, at most what GOGC=100
// allows) before the next one; in a cgroup with a memory limit it sets the
// soft memory limit to 90% of that. Its idle collector (IdleCollector) runs
// a collection in the wait between two loops when the next loop would
// otherwise run one. GOGC or GOMEMLIMIT in the environment turn both off.
// "Who sets GOGC and the soft memory limit, and who calls runtime.GC" is
// answered here.
//
// It imports only the standard library and klog; nothing of the autoscaler.
package heapgovernor
