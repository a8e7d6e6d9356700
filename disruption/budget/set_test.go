package budget

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

func TestAllowed(t *testing.T) {
	monday10 := utc(30, 10, 0) // inside "0 9 * * 1-5" + 8h
	monday18 := utc(30, 18, 0) // outside it
	businessHours := "nodes=0;reasons=consolidatable,underutilized;schedule=0 9 * * 1-5;duration=8h"
	for _, tc := range []struct {
		name                   string
		budgets                []string
		group                  string
		reason                 disruption.Reason
		groupNodes, disrupting int
		now                    time.Time
		want                   Limit
		wantAllowed            int
	}{
		{name: "no budgets: 10% of the group, rounded up", reason: disruption.Drifted,
			groupNodes: 100, now: monday10, want: Limit{10, "default"}, wantAllowed: 10},
		{name: "default less the disrupting", reason: disruption.Consolidatable,
			groupNodes: 100, disrupting: 4, now: monday10, want: Limit{10, "default"}, wantAllowed: 6},
		{name: "default on a small group lets one go", reason: disruption.Expired,
			groupNodes: 3, now: monday10, want: Limit{1, "default"}, wantAllowed: 1},
		{name: "never below zero", reason: disruption.Drifted,
			groupNodes: 10, disrupting: 5, now: monday10, want: Limit{1, "default"}, wantAllowed: 0},
		{name: "empty group", reason: disruption.Drifted, now: monday10, want: Limit{0, "default"}},
		{name: "the default does not hold unhealthy", reason: disruption.Unhealthy,
			groupNodes: 20, disrupting: 3, now: monday10, want: Limit{Nodes: 20}, wantAllowed: 17},
		{name: "the default does not hold interrupted", reason: disruption.Interrupted,
			groupNodes: 20, now: monday10, want: Limit{Nodes: 20}, wantAllowed: 20},
		{name: "a budget without reasons does not hold unhealthy", budgets: []string{"nodes=0"},
			reason: disruption.Unhealthy, groupNodes: 20, now: monday10, want: Limit{Nodes: 20}, wantAllowed: 20},
		{name: "a budget naming unhealthy holds it", budgets: []string{"nodes=0", "nodes=2;reasons=unhealthy"},
			reason: disruption.Unhealthy, groupNodes: 20, disrupting: 1, now: monday10,
			want: Limit{2, "nodes=2;reasons=unhealthy"}, wantAllowed: 1},
		{name: "a budget replaces the default", budgets: []string{"nodes=30%"}, reason: disruption.Drifted,
			groupNodes: 100, disrupting: 5, now: monday10, want: Limit{30, "nodes=30%"}, wantAllowed: 25},
		{name: "the smallest active budget wins", budgets: []string{"nodes=30%", "nodes=5", "nodes=50%"},
			reason: disruption.Drifted, groupNodes: 100, now: monday10, want: Limit{5, "nodes=5"}, wantAllowed: 5},
		{name: "a tie goes to the first given", budgets: []string{"nodes=10%", "nodes=10"},
			reason: disruption.Drifted, groupNodes: 100, now: monday10, want: Limit{10, "nodes=10%"}, wantAllowed: 10},
		{name: "a window of no consolidation, inside", budgets: []string{"nodes=100%", businessHours},
			reason: disruption.Consolidatable, groupNodes: 50, now: monday10,
			want: Limit{0, mustParse(t, businessHours).String()}, wantAllowed: 0},
		{name: "a window of no consolidation, outside", budgets: []string{"nodes=100%", businessHours},
			reason: disruption.Consolidatable, groupNodes: 50, disrupting: 2, now: monday18,
			want: Limit{50, "nodes=100%"}, wantAllowed: 48},
		{name: "a window of no consolidation does not hold drift", budgets: []string{"nodes=100%", businessHours},
			reason: disruption.Drifted, groupNodes: 50, now: monday10, want: Limit{50, "nodes=100%"}, wantAllowed: 50},
		{name: "only an inactive budget matches: the default holds", budgets: []string{businessHours},
			reason: disruption.Consolidatable, groupNodes: 50, now: monday18, want: Limit{5, "default"}, wantAllowed: 5},
		{name: "a budget of another group: the default holds", budgets: []string{"nodes=0;node-groups=^spot-"},
			group: "ondemand", reason: disruption.Drifted, groupNodes: 50, now: monday10,
			want: Limit{5, "default"}, wantAllowed: 5},
		{name: "a budget of this group", budgets: []string{"nodes=0;node-groups=^spot-"},
			group: "spot-a", reason: disruption.Drifted, groupNodes: 50, now: monday10,
			want: Limit{0, "nodes=0;node-groups=^spot-"}},
		{name: "a budget of another reason: the default holds", budgets: []string{"nodes=1;reasons=expired"},
			reason: disruption.Drifted, groupNodes: 50, now: monday10, want: Limit{5, "default"}, wantAllowed: 5},
		{name: "a count above the group's size", budgets: []string{"nodes=80"},
			reason: disruption.Drifted, groupNodes: 50, disrupting: 10, now: monday10,
			want: Limit{80, "nodes=80"}, wantAllowed: 70},
		{name: "a night window across midnight, after midnight", budgets: []string{"nodes=1", "nodes=50%;schedule=0 22 * * *;duration=6h"},
			reason: disruption.Expired, groupNodes: 10, now: utc(30, 2, 0),
			want: Limit{1, "nodes=1"}, wantAllowed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := ParseSet(tc.budgets)
			if err != nil {
				t.Fatal(err)
			}
			group := tc.group
			if group == "" {
				group = "g"
			}
			if diff := cmp.Diff(tc.want, set.Limit(group, tc.reason, tc.groupNodes, tc.now)); diff != "" {
				t.Errorf("Limit (-want +got):\n%s", diff)
			}
			got := set.Allowed(group, tc.reason, tc.groupNodes, tc.disrupting, tc.now)
			if diff := cmp.Diff(tc.wantAllowed, got); diff != "" {
				t.Errorf("Allowed (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAllowedOverADay walks a fake clock through a day in 30-minute steps
// with a night window (22:00 for 8h, across midnight) that allows more
// drift than the daytime budget, and checks each step.
func TestAllowedOverADay(t *testing.T) {
	set, err := ParseSet([]string{
		"nodes=1;reasons=drifted",
		"nodes=0;reasons=drifted;schedule=0 12 * * *;duration=1h",
		"nodes=100%;reasons=expired;schedule=0 22 * * *;duration=8h",
	})
	if err != nil {
		t.Fatal(err)
	}
	var drifted, expired []int
	for now := utc(29, 0, 0); now.Before(utc(30, 0, 0)); now = now.Add(30 * time.Minute) {
		drifted = append(drifted, set.Allowed("g", disruption.Drifted, 20, 0, now))
		expired = append(expired, set.Allowed("g", disruption.Expired, 20, 0, now))
	}
	// Drift: one at a time, none from 12:00 to 13:00 (steps 24 and 25).
	wantDrifted := make([]int, 48)
	for i := range wantDrifted {
		wantDrifted[i] = 1
	}
	wantDrifted[24], wantDrifted[25] = 0, 0
	// Expiry: the default (10% of 20) by day; the whole group from 22:00 to
	// 06:00, the end of the previous night's window included.
	wantExpired := make([]int, 48)
	for i := range wantExpired {
		if i < 12 || i >= 44 {
			wantExpired[i] = 20
		} else {
			wantExpired[i] = 2
		}
	}
	if diff := cmp.Diff(wantDrifted, drifted); diff != "" {
		t.Errorf("drifted allowed per half hour (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantExpired, expired); diff != "" {
		t.Errorf("expired allowed per half hour (-want +got):\n%s", diff)
	}
}

func TestParseSetError(t *testing.T) {
	_, err := ParseSet([]string{"nodes=1", "nodes=1;schedule=@daily"})
	if err == nil || !strings.Contains(err.Error(), `disruption budget "nodes=1;schedule=@daily": schedule needs a duration`) {
		t.Errorf("ParseSet error = %v", err)
	}
}

func TestSetString(t *testing.T) {
	set, err := ParseSet([]string{"nodes=1", "nodes=0;schedule=@daily;duration=1h"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("[nodes=1 nodes=0;schedule=@daily;duration=1h0m0s]", set.String()); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
	var zero Set
	if diff := cmp.Diff(Limit{2, "default"}, zero.Limit("g", disruption.Drifted, 11, utc(30, 0, 0))); diff != "" {
		t.Errorf("zero Set Limit (-want +got):\n%s", diff)
	}
	// Scale-down's reasons keep upstream's limits: no default.
	if diff := cmp.Diff(Limit{11, ""}, zero.Limit("g", disruption.Empty, 11, utc(30, 0, 0))); diff != "" {
		t.Errorf("zero Set Limit of empty (-want +got):\n%s", diff)
	}
}

// BenchmarkAllowed is one engine question against five budgets, two of
// them scheduled.
func BenchmarkAllowed(b *testing.B) {
	set, err := ParseSet([]string{
		"nodes=10%",
		"nodes=3;node-groups=^spot-",
		"nodes=0;reasons=consolidatable,underutilized;schedule=0 9 * * 1-5;duration=8h",
		"nodes=50%;reasons=expired;schedule=0 22 * * *;duration=8h",
		"nodes=2;reasons=unhealthy",
	})
	if err != nil {
		b.Fatal(err)
	}
	now := utc(30, 10, 0)
	b.ReportAllocs()
	for b.Loop() {
		set.Allowed("spot-a", disruption.Drifted, 100, 3, now)
	}
}
