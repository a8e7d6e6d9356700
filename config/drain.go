package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DrainPriority is one <priority>:<terminationGracePeriodSeconds> pair of --drain-priority-config.
type DrainPriority struct {
	Priority                   int32
	TerminationGracePeriodSecs int64
}

// ParseDrainPriorityConfig parses "10000:20,1000:100,0:60", sorted by
// descending priority. Priorities must be unique, grace periods non-negative.
func ParseDrainPriorityConfig(s string) ([]DrainPriority, error) {
	var out []DrainPriority
	seen := map[int32]bool{}
	for _, item := range strings.Split(s, ",") {
		p, g, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("want <priority>:<terminationGracePeriodSeconds>, got %q", item)
		}
		prio, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("priority %q in %q is not a 32-bit whole number", p, item)
		}
		grace, err := strconv.ParseInt(g, 10, 64)
		if err != nil || grace < 0 {
			return nil, fmt.Errorf("grace period %q in %q is not a non-negative whole number", g, item)
		}
		if grace > math.MaxInt64/int64(time.Second) {
			return nil, fmt.Errorf("grace period %d in %q is too long", grace, item)
		}
		if seen[int32(prio)] {
			return nil, fmt.Errorf("priority %d appears twice", prio)
		}
		seen[int32(prio)] = true
		out = append(out, DrainPriority{Priority: int32(prio), TerminationGracePeriodSecs: grace})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out, nil
}
