package explain

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WritePodGroup writes a person's view of one pod group: the outcome, then
// a table of the node groups (node group, verdict, nodes, reason), the
// chosen group marked with "*".
func WritePodGroup(w io.Writer, g PodGroup, at time.Time) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Loop at %s\n", at.UTC().Format(time.RFC3339))
	fmt.Fprintf(b, "Pod group: %d pod(s)", g.PodCount)
	if len(g.Pods) > 0 {
		fmt.Fprintf(b, ", e.g. %s", g.Pods[0])
	}
	if g.Request != "" {
		fmt.Fprintf(b, ", for ProvisioningRequest %s", g.Request)
	}
	fmt.Fprintf(b, "\nOutcome: %s", g.Outcome)
	if g.Message != "" {
		fmt.Fprintf(b, ": %s", g.Message)
	}
	if g.WaitsFor != "" {
		fmt.Fprintf(b, " (waits for an upcoming node of node group %s)", g.WaitsFor)
	}
	b.WriteString("\n")
	if g.DecidedAt != nil && len(g.NodeGroups) > 0 {
		fmt.Fprintf(b, "Scale-up decided at %s:\n", g.DecidedAt.UTC().Format(time.RFC3339))
	}
	if len(g.NodeGroups) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\tNODE GROUP\tVERDICT\tNODES\tREASON")
		for _, v := range g.NodeGroups {
			mark, verdict, nodes := "", "refused", "-"
			if v.Chosen {
				mark = "*"
			}
			if v.Fits {
				verdict, nodes = "fits", fmt.Sprint(v.Nodes)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, v.NodeGroup, verdict, nodes, reasonText(v))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if g.MoreNodeGroups > 0 {
			fmt.Fprintf(b, "... and %d more node group(s) that refused\n", g.MoreNodeGroups)
		}
		if hasChosen(g) {
			b.WriteString("(* the node group the expander chose)\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func hasChosen(g PodGroup) bool {
	for _, v := range g.NodeGroups {
		if v.Chosen {
			return true
		}
	}
	return false
}

// reasonText is a verdict's reason column: the refusal with its plugin,
// numbers and back-off end, or for a fit the pods it takes and the
// expander's why.
func reasonText(v NodeGroupVerdict) string {
	var parts []string
	if v.Fits {
		parts = append(parts, fmt.Sprintf("takes %d pod(s)", v.Pods))
		if v.Why != "" {
			parts = append(parts, v.Why)
		}
		return strings.Join(parts, "; ")
	}
	r := v.Reason
	if v.Plugin != "" {
		r = fmt.Sprintf("%s: %s", v.Plugin, r)
	}
	parts = append(parts, r)
	if v.Detail != "" {
		parts = append(parts, v.Detail)
	}
	if v.Until != nil {
		parts = append(parts, "until "+v.Until.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, "; ")
}

// WriteNode writes a person's view of one node's scale-down verdict, then
// its disruption verdicts (one line per reason).
func WriteNode(w io.Writer, v NodeVerdict, note string, at time.Time) error {
	b := &strings.Builder{}
	fmt.Fprintf(b, "Loop at %s\n", at.UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "Node:\t%s\n", v.Node)
	if v.NodeGroup != "" {
		fmt.Fprintf(tw, "Node group:\t%s\n", v.NodeGroup)
	}
	switch {
	case v.NoScaleDownVerdict:
		fmt.Fprintf(tw, "Verdict:\tno scale-down verdict\n")
	case v.Removable:
		fmt.Fprintf(tw, "Verdict:\tremovable now\n")
	case v.Unneeded:
		fmt.Fprintf(tw, "Verdict:\tunneeded\n")
	default:
		fmt.Fprintf(tw, "Verdict:\tkept\n")
	}
	if v.Since != nil {
		fmt.Fprintf(tw, "Unneeded since:\t%s\n", v.Since.UTC().Format(time.RFC3339))
	}
	if v.TimeLeft != nil {
		fmt.Fprintf(tw, "Time left:\t%s\n", v.TimeLeft.Round(time.Second))
	}
	if v.Reason != "" {
		fmt.Fprintf(tw, "Reason:\t%s\n", v.Reason)
	}
	if v.Detail != "" {
		fmt.Fprintf(tw, "Detail:\t%s\n", v.Detail)
	}
	if v.Utilization != nil {
		u := fmt.Sprintf("%.2f", *v.Utilization)
		if v.Threshold != nil {
			u += fmt.Sprintf(" (threshold %.2f)", *v.Threshold)
		}
		fmt.Fprintf(tw, "Utilization:\t%s\n", u)
	}
	if note != "" {
		fmt.Fprintf(tw, "Scale-down:\t%s\n", note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := writeDisruptions(b, v.Disruptions); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteRequest writes a person's view of a ProvisioningRequest in one loop:
// the conditions the loop set on it, then each of its pod groups.
func WriteRequest(w io.Writer, conds []Condition, groups []PodGroup, at time.Time) error {
	if len(conds) > 0 {
		b := &strings.Builder{}
		fmt.Fprintf(b, "Loop at %s set:\n", at.UTC().Format(time.RFC3339))
		for _, c := range conds {
			fmt.Fprintf(b, "  %s=%s (%s): %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		b.WriteString("\n")
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	for i, g := range groups {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		if err := WritePodGroup(w, g, at); err != nil {
			return err
		}
	}
	return nil
}
