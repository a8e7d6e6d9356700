package explain

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
)

// Decisions of a disruption verdict.
const (
	// DecisionInFlight: the node is being disrupted for the reason (its
	// plan started in an earlier loop, or in this one).
	DecisionInFlight = "in flight"
	// DecisionStarts: the node is proposed and nothing holds it back: its
	// disruption starts in this loop.
	DecisionStarts = "starts"
	// DecisionProposed: the node is proposed; whether it starts is the
	// engine's decision at its next repair (consolidation plans after the
	// engine has run in the loop).
	DecisionProposed = "proposed"
	// DecisionHeld: the node is proposed but a protection or its node
	// group's budget holds it back (HeldBy, Hold).
	DecisionHeld = "held back"
	// DecisionNo: the reason does not hold for the node (Why says why, when
	// known).
	DecisionNo = "no"
)

// What holds a proposed node back (DisruptionVerdict.HeldBy).
const (
	HeldByProtection = "protection"
	HeldByBudget     = "budget"
	// HeldByEarlierReason: the node goes for a reason served before this
	// one (Hold names it).
	HeldByEarlierReason = "earlier-reason"
)

// DisruptionVerdict is one node's answer for one disruption reason
// (consolidatable, drifted, expired, ...): whether the reason holds, and
// what the engine does about it.
type DisruptionVerdict struct {
	Node string `json:"-"`
	// NodeGroup is the node's group, when known.
	NodeGroup string `json:"-"`
	// Reason is the disruption reason (the engine's name).
	Reason string `json:"reason"`
	// Decision is one of the Decision* values.
	Decision string `json:"decision"`
	// Why is the source's message (why the reason holds) or, for
	// DecisionNo, why it does not.
	Why string `json:"why,omitempty"`
	// Nodes are the nodes disrupted together with this one (a set that
	// consolidation removes at once), this one included; empty for one.
	Nodes []string `json:"nodes,omitempty"`
	// SavingPerHour is the estimated cost per hour saved (0: unknown or
	// not the point).
	SavingPerHour float64 `json:"savingPerHour,omitempty"`
	// Replacement is the new capacity asked for first ("1 of ng-a");
	// "none" for a delete-only candidate.
	Replacement string `json:"replacement,omitempty"`
	// HeldBy and Hold say what holds a proposed node back (HeldBy*) and
	// its specifics: the protection, or the budget's numbers.
	HeldBy string `json:"heldBy,omitempty"`
	Hold   string `json:"hold,omitempty"`
}

// MaxDisruptionVerdicts bounds the disruption verdicts of one loop (the
// others are dropped).
const MaxDisruptionVerdicts = 50000

// AddDisruption records a node's disruption verdict in the loop being
// recorded; `explain node` shows it beside the node's scale-down verdict.
func (r *Recorder) AddDisruption(v DisruptionVerdict) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || len(r.cur.disruptions) >= MaxDisruptionVerdicts {
		return
	}
	r.cur.disruptions = append(r.cur.disruptions, v)
}

// mergeDisruptions gives each node verdict of l its disruption verdicts,
// adding a verdict for the nodes scale-down had none for.
func mergeDisruptions(l *Loop) {
	if len(l.disruptions) == 0 {
		return
	}
	at := make(map[string]int, len(l.Nodes))
	for i, n := range l.Nodes {
		at[n.Node] = i
	}
	for _, d := range l.disruptions {
		i, ok := at[d.Node]
		if !ok {
			i = len(l.Nodes)
			at[d.Node] = i
			l.Nodes = append(l.Nodes, NodeVerdict{Node: d.Node, NodeGroup: d.NodeGroup, NoScaleDownVerdict: true})
		}
		l.Nodes[i].Disruptions = append(l.Nodes[i].Disruptions, d)
	}
	for i := range l.Nodes {
		ds := l.Nodes[i].Disruptions
		sort.SliceStable(ds, func(a, b int) bool { return ds[a].Reason < ds[b].Reason })
	}
	l.disruptions = nil
}

// writeDisruptions writes the node's disruption verdicts as a table.
func writeDisruptions(b *strings.Builder, ds []DisruptionVerdict) error {
	if len(ds) == 0 {
		return nil
	}
	b.WriteString("\nDisruption:\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  REASON\tDECISION\tSAVING/H\tREPLACEMENT\tWHY")
	for _, d := range ds {
		saving, repl := "-", d.Replacement
		if d.SavingPerHour != 0 {
			saving = fmt.Sprintf("%.4f", d.SavingPerHour)
		}
		if repl == "" {
			repl = "-"
		}
		decision := d.Decision
		if d.HeldBy != "" {
			decision += " (" + d.HeldBy + ")"
		}
		why := d.Why
		if d.Hold != "" {
			why = strings.TrimPrefix(why+"; held: "+d.Hold, "; ")
		}
		if len(d.Nodes) > 1 {
			why += fmt.Sprintf(" [with %s]", strings.Join(d.Nodes, ", "))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", d.Reason, decision, saving, repl, why)
	}
	return tw.Flush()
}
