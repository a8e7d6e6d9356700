package budget

import (
	"fmt"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// Default is the budget of a voluntary reason (but scale-down's) in a group
// no active budget matches: 10% of the group's nodes, Karpenter's default.
var Default = Nodes{Value: 10, Percent: true}

// Set is the budgets given on the command line. The zero Set has none: the
// default holds for every voluntary reason.
type Set struct {
	budgets []Budget
}

// NewSet returns a set of budgets.
func NewSet(budgets ...Budget) Set {
	return Set{budgets: append([]Budget(nil), budgets...)}
}

// ParseSet parses one budget per value (the values of a repeated flag).
func ParseSet(values []string) (Set, error) {
	budgets := make([]Budget, 0, len(values))
	for _, v := range values {
		b, err := Parse(v)
		if err != nil {
			return Set{}, err
		}
		budgets = append(budgets, b)
	}
	return Set{budgets: budgets}, nil
}

// Budgets returns the set's budgets, in the order given.
func (s Set) Budgets() []Budget { return append([]Budget(nil), s.budgets...) }

// Limit is how many of a group's nodes may be disrupting at once for one
// reason, and which budget says so.
type Limit struct {
	// Nodes is the limit on the group's nodes disrupting at once, the
	// nodes already disrupting included.
	Nodes int
	// By is the budget that sets the limit, in flag syntax; "default" for
	// the default budget; "" when no budget holds the reason (involuntary
	// reasons without a budget naming them: Nodes is the group's size).
	By string
}

// Limit returns the limit on reason's disruptions in group, of
// groupNodes nodes, at now: the smallest of the active budgets that match
// group and reason (the first given wins a tie); when none does, the
// default for a voluntary reason, and no limit (the group's size) for an
// involuntary one.
func (s Set) Limit(group string, reason disruption.Reason, groupNodes int, now time.Time) Limit {
	best, bestNodes := -1, 0
	for i := range s.budgets {
		b := &s.budgets[i]
		if !b.Matches(group, reason) || !b.Active(now) {
			continue
		}
		if n := b.Nodes.Of(groupNodes); best < 0 || n < bestNodes {
			best, bestNodes = i, n
		}
	}
	switch {
	case best >= 0:
		return Limit{Nodes: bestNodes, By: s.budgets[best].String()}
	case Voluntary(reason) && !disruption.DeleteOnly(reason):
		return Limit{Nodes: Default.Of(groupNodes), By: "default"}
	default:
		return Limit{Nodes: max(groupNodes, 0)}
	}
}

// Allowed returns how many more of group's nodes may start being disrupted
// for reason at now: the Limit less the group's nodes already disrupting
// (for any reason), never below 0. groupNodes counts the group's nodes,
// the disrupting ones included.
func (s Set) Allowed(group string, reason disruption.Reason, groupNodes, disrupting int, now time.Time) int {
	return max(s.Limit(group, reason, groupNodes, now).Nodes-disrupting, 0)
}

// String lists the budgets in flag syntax, for logs.
func (s Set) String() string {
	out := make([]string, len(s.budgets))
	for i := range s.budgets {
		out[i] = s.budgets[i].String()
	}
	return fmt.Sprint(out)
}
