package cloudprovider

import (
	"fmt"
	"sort"
	"strings"
)

// Resource names of the limits: cpu in cores, memory in bytes; any other
// name is a GPU type or custom resource, counted in units.
const (
	ResourceNameCores  = "cpu"
	ResourceNameMemory = "memory"
)

// ResourceLimiter holds the cluster-wide minimum and maximum of each resource.
type ResourceLimiter struct {
	min map[string]int64
	max map[string]int64
}

// NewResourceLimiter copies the given limits.
func NewResourceLimiter(min, max map[string]int64) *ResourceLimiter {
	l := &ResourceLimiter{min: map[string]int64{}, max: map[string]int64{}}
	for k, v := range min {
		l.min[k] = v
	}
	for k, v := range max {
		l.max[k] = v
	}
	return l
}

// GetMin returns the minimum of resource, 0 when none is set.
func (l *ResourceLimiter) GetMin(resource string) int64 { return l.min[resource] }

// GetMax returns the maximum of resource, 0 when none is set.
func (l *ResourceLimiter) GetMax(resource string) int64 { return l.max[resource] }

// HasMaxLimitSet reports whether resource has a maximum.
func (l *ResourceLimiter) HasMaxLimitSet(resource string) bool { _, ok := l.max[resource]; return ok }

// HasMinLimitSet reports whether resource has a minimum.
func (l *ResourceLimiter) HasMinLimitSet(resource string) bool { _, ok := l.min[resource]; return ok }

// GetResources lists every limited resource, sorted.
func (l *ResourceLimiter) GetResources() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]int64{l.min, l.max} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (l *ResourceLimiter) String() string {
	var parts []string
	for _, r := range l.GetResources() {
		parts = append(parts, fmt.Sprintf("{%s: %d - %d}", r, l.min[r], l.max[r]))
	}
	return strings.Join(parts, ", ")
}
