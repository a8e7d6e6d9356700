package budget

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// GroupSeparator separates the budgets of one node group's own value.
const GroupSeparator = "|"

// ParseGroup reads a node group's own budgets (its DisruptionBudget option):
// one or more budgets in the flag syntax separated by '|'. A group's budget
// applies to that group only, so node-groups is refused. "" is no budget.
func ParseGroup(value string) ([]Budget, error) {
	var out []Budget
	for _, part := range strings.Split(value, GroupSeparator) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		b, err := Parse(part)
		if err != nil {
			return nil, err
		}
		if b.NodeGroups != nil {
			return nil, fmt.Errorf("disruption budget %q: %s is not allowed in a node group's own budget", part, keyNodeGroups)
		}
		out = append(out, b)
	}
	return out, nil
}

// GroupValues returns every node group's own budget value (its
// DisruptionBudget option), by group id; a group without one may be left
// out or given "". An error (the groups could not be listed) keeps the
// values read before.
type GroupValues func(ctx context.Context) (map[string]string, error)

// PerGroup is a disruption.Budget that honours the node groups' own
// budgets: for a group and reason that one of the group's own budgets
// matches and that budget is active, the smallest such budget holds (the
// flag's budgets do not apply to it); otherwise Fallback answers. A group
// value that does not parse is logged once (with the group and the value)
// and ignored: the fallback holds for that group.
//
// The values are read by Refresh, once per loop (the engine and the
// explainer call it with the loop's time); until the first Refresh every
// group has the fallback.
type PerGroup struct {
	fallback disruption.Budget
	values   GroupValues

	mu   sync.Mutex
	at   time.Time
	own  map[string][]Budget
	seen map[string]string // the last value read per group
}

var _ disruption.Budget = (*PerGroup)(nil)

// NewPerGroup returns the per-group budget over fallback (nil:
// disruption.DefaultBudget).
func NewPerGroup(fallback disruption.Budget, values GroupValues) *PerGroup {
	if fallback == nil {
		fallback = disruption.DefaultBudget{}
	}
	return &PerGroup{fallback: fallback, values: values, own: map[string][]Budget{}, seen: map[string]string{}}
}

// Refresh reads the groups' own budgets unless it already did for now.
func (p *PerGroup) Refresh(ctx context.Context, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && p.at.Equal(now) {
		return
	}
	p.at = now
	logger := klog.FromContext(ctx)
	vals, err := p.values(ctx)
	if err != nil {
		logger.V(2).Info("Node groups' own disruption budgets not read; those read before hold", "err", err)
		return
	}
	own := make(map[string][]Budget, len(vals))
	seen := make(map[string]string, len(vals))
	for group, v := range vals {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		seen[group] = v
		bs, err := ParseGroup(v)
		if err != nil {
			if p.seen[group] != v {
				logger.Info("Ignoring a node group's disruption budget: it does not parse; the global budgets hold for the group",
					"nodeGroup", group, "value", v, "err", err)
			}
			continue
		}
		if p.seen[group] != v {
			logger.V(2).Info("Node group's own disruption budget", "nodeGroup", group, "budget", v)
		}
		own[group] = bs
	}
	p.own, p.seen = own, seen
}

// Own returns the group's own budgets as last read (nil: none).
func (p *PerGroup) Own(group string) []Budget {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Budget(nil), p.own[group]...)
}

// Allowed implements disruption.Budget.
func (p *PerGroup) Allowed(group string, reason disruption.Reason, groupNodes, disrupting int, now time.Time) int {
	p.mu.Lock()
	own := p.own[group]
	p.mu.Unlock()
	limit, found := 0, false
	for i := range own {
		b := &own[i]
		if !b.Matches(group, reason) || !b.Active(now) {
			continue
		}
		if n := b.Nodes.Of(groupNodes); !found || n < limit {
			limit, found = n, true
		}
	}
	if !found {
		return p.fallback.Allowed(group, reason, groupNodes, disrupting, now)
	}
	return max(limit-disrupting, 0)
}
