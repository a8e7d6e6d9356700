package budget

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

func mustParse(t *testing.T, v string) Budget {
	t.Helper()
	b, err := Parse(v)
	if err != nil {
		t.Fatalf("Parse(%q): %v", v, err)
	}
	return b
}

// utc builds a UTC time on a day of November 2026 (the 30th is a Monday).
func utc(day, hour, minute int) time.Time {
	return time.Date(2026, time.November, day, hour, minute, 0, 0, time.UTC)
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "nodes=3", want: "nodes=3"},
		{in: "nodes=10%", want: "nodes=10%"},
		{in: " nodes = 0% ; ", want: "nodes=0%"},
		{in: "nodes=100%", want: "nodes=100%"},
		{in: "nodes=10%;reasons=drifted,expired;node-groups=^spot-;schedule=0 9 * * 1-5;duration=8h",
			want: "nodes=10%;reasons=drifted,expired;node-groups=^spot-;schedule=0 9 * * 1-5;duration=8h0m0s"},
		{in: "reasons=Drifted, Underutilized;nodes=1", want: "nodes=1;reasons=drifted,underutilized"},
		{in: "nodes=0;schedule=@daily;duration=90m", want: "nodes=0;schedule=@daily;duration=1h30m0s"},
		{in: "nodes=0;schedule=0 22 * * MON-FRI;duration=10h", want: "nodes=0;schedule=0 22 * * MON-FRI;duration=10h0m0s"},
		{in: "nodes=2;reasons=;node-groups=", want: "nodes=2"},

		{in: "", err: "nodes is required"},
		{in: "reasons=drifted", err: "nodes is required"},
		{in: "nodes", err: `field "nodes": want key=value`},
		{in: "nodes=3;nodes=4", err: "nodes given twice"},
		{in: "nodes=3;max=4", err: `unknown key "max"`},
		{in: "nodes=abc", err: `nodes "abc": want a count`},
		{in: "nodes=-1", err: `nodes "-1": want a count`},
		{in: "nodes=101%", err: `nodes "101%": want a count`},
		{in: "nodes=1.5%", err: `nodes "1.5%": want a count`},
		{in: "nodes=%", err: `nodes "%": want a count`},
		{in: "nodes=1;reasons=drifted,bored", err: `unknown disruption reason "bored"`},
		{in: "nodes=1;node-groups=(", err: "node-groups: error parsing regexp"},
		{in: "nodes=1;schedule=@daily", err: "schedule needs a duration"},
		{in: "nodes=1;duration=1h", err: "duration is only allowed with a schedule"},
		{in: "nodes=1;schedule=0 9 * *;duration=1h", err: "want five fields"},
		{in: "nodes=1;schedule=0 0 9 * * 1;duration=1h", err: "want five fields"},
		{in: "nodes=1;schedule=61 9 * * *;duration=1h", err: `schedule "61 9 * * *"`},
		{in: "nodes=1;schedule=@every 1h;duration=1h", err: "@every has no fixed times"},
		{in: "nodes=1;schedule=CRON_TZ=Europe/Paris 0 9 * * *;duration=1h", err: "a time zone is not supported"},
		{in: "nodes=1;schedule=0 0 30 2 *;duration=1h", err: "never fires"},
		{in: "nodes=1;schedule=@daily;duration=8", err: "duration: time: missing unit"},
		{in: "nodes=1;schedule=@daily;duration=-1h", err: "must be positive"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			b, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) error = %v, want one containing %q", tc.in, err, tc.err)
				}
				if !strings.HasPrefix(err.Error(), "disruption budget ") {
					t.Errorf("error %q does not name the budget", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("String() (-want +got):\n%s", diff)
			}
			// String is the flag syntax: it parses back to itself.
			again := mustParse(t, b.String())
			if diff := cmp.Diff(b.String(), again.String()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNodesOf(t *testing.T) {
	for _, tc := range []struct {
		nodes      string
		groupNodes int
		want       int
	}{
		{"3", 100, 3},
		{"3", 0, 3},
		{"10%", 100, 10},
		{"10%", 11, 2}, // 1.1 rounds up
		{"10%", 9, 1},  // 0.9 rounds up
		{"10%", 1, 1},
		{"10%", 0, 0},
		{"20%", 19, 4}, // 3.8
		{"0%", 50, 0},
		{"100%", 7, 7},
		{"33%", 3, 1}, // 0.99
		{"34%", 3, 2}, // 1.02
	} {
		n, err := parseNodes(tc.nodes)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, n.Of(tc.groupNodes)); diff != "" {
			t.Errorf("%s of %d (-want +got):\n%s", tc.nodes, tc.groupNodes, diff)
		}
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		budget string
		group  string
		reason disruption.Reason
		want   bool
	}{
		{"nodes=1", "any", disruption.Drifted, true},
		// Scale-down's reasons too only when named.
		{"nodes=1", "any", disruption.Empty, false},
		{"nodes=1", "any", disruption.Underutilized, false},
		{"nodes=1;reasons=empty", "any", disruption.Empty, true},
		{"nodes=1;reasons=consolidatable,underutilized", "any", disruption.Underutilized, true},
		{"nodes=1", "any", disruption.Consolidatable, true},
		// Without reasons, a budget holds voluntary reasons only.
		{"nodes=1", "any", disruption.Unhealthy, false},
		{"nodes=1", "any", disruption.Interrupted, false},
		{"nodes=1;reasons=unhealthy", "any", disruption.Unhealthy, true},
		{"nodes=1;reasons=unhealthy", "any", disruption.Drifted, false},
		{"nodes=1;reasons=drifted,expired", "any", disruption.Expired, true},
		{"nodes=1;reasons=drifted,expired", "any", disruption.Consolidatable, false},
		{"nodes=1;node-groups=^spot-", "spot-a", disruption.Drifted, true},
		{"nodes=1;node-groups=^spot-", "ondemand-spot-a", disruption.Drifted, false},
		{"nodes=1;node-groups=spot", "ondemand-spot-a", disruption.Drifted, true}, // unanchored
		{"nodes=1;node-groups=^(a|b)$", "b", disruption.Drifted, true},
		{"nodes=1;node-groups=^(a|b)$", "bc", disruption.Drifted, false},
	} {
		b := mustParse(t, tc.budget)
		if got := b.Matches(tc.group, tc.reason); got != tc.want {
			t.Errorf("%q matches (%s, %s) = %v, want %v", tc.budget, tc.group, tc.reason, got, tc.want)
		}
	}
}

func TestActive(t *testing.T) {
	type at struct {
		now  time.Time
		want bool
	}
	for _, tc := range []struct {
		name, budget string
		at           []at
	}{
		{"no schedule", "nodes=1", []at{{utc(30, 3, 0), true}, {time.Time{}, true}}},
		{"business hours, weekdays", "nodes=0;schedule=0 9 * * 1-5;duration=8h", []at{
			{utc(30, 8, 59), false}, // Monday
			{utc(30, 9, 0), true},   // from the schedule time on
			{utc(30, 12, 30), true},
			{time.Date(2026, time.November, 30, 16, 59, 59, 999999999, time.UTC), true},
			{utc(30, 17, 0), false}, // the window is [09:00, 17:00)
			{utc(29, 10, 0), false}, // Sunday
			{utc(28, 10, 0), false}, // Saturday
			{utc(27, 10, 0), true},  // Friday
		}},
		{"across midnight", "nodes=0;schedule=0 22 * * *;duration=4h", []at{
			{utc(29, 21, 59), false},
			{utc(29, 22, 0), true},
			{utc(29, 23, 59), true},
			{utc(30, 0, 0), true},
			{utc(30, 1, 59), true},
			{utc(30, 2, 0), false},
			{utc(30, 12, 0), false},
		}},
		{"friday night across the weekend", "nodes=0;schedule=0 20 * * FRI;duration=58h", []at{
			{utc(27, 19, 0), false},
			{utc(27, 20, 0), true},
			{utc(29, 18, 0), true}, // Sunday
			{utc(30, 5, 59), true}, // Monday: Friday 20:00 + 58h is 06:00
			{utc(30, 6, 0), false},
			{utc(30, 9, 0), false},
		}},
		{"across the end of the month and year", "nodes=0;schedule=@monthly;duration=36h", []at{
			{time.Date(2026, time.December, 31, 23, 0, 0, 0, time.UTC), false},
			{time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC), true},
			{time.Date(2027, time.January, 2, 11, 59, 0, 0, time.UTC), true},
			{time.Date(2027, time.January, 2, 12, 0, 0, 0, time.UTC), false},
		}},
		{"hourly windows", "nodes=0;schedule=@hourly;duration=15m", []at{
			{utc(30, 5, 14), true},
			{utc(30, 5, 15), false},
			{utc(30, 5, 59), false},
			{utc(30, 6, 0), true},
		}},
		{"windows longer than the period are always on", "nodes=0;schedule=@hourly;duration=2h", []at{
			{utc(30, 5, 0), true}, {utc(30, 5, 59), true},
		}},
		{"the schedule is UTC whatever now's zone", "nodes=0;schedule=0 9 * * *;duration=1h", []at{
			// 10:30 in UTC+2 is 08:30 UTC.
			{time.Date(2026, time.November, 30, 10, 30, 0, 0, time.FixedZone("UTC+2", 2*3600)), false},
			// 11:30 in UTC+2 is 09:30 UTC.
			{time.Date(2026, time.November, 30, 11, 30, 0, 0, time.FixedZone("UTC+2", 2*3600)), true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustParse(t, tc.budget)
			for _, a := range tc.at {
				if got := b.Active(a.now); got != a.want {
					t.Errorf("Active(%s) = %v, want %v", a.now.Format(time.RFC3339Nano), got, a.want)
				}
			}
		})
	}
}

func TestWindow(t *testing.T) {
	type window struct {
		Start, End time.Time
		OK         bool
	}
	for _, tc := range []struct {
		name, budget string
		now          time.Time
		want         window
	}{
		{"no schedule", "nodes=1", utc(30, 9, 0), window{}},
		{"inactive", "nodes=0;schedule=0 9 * * 1-5;duration=8h", utc(30, 18, 0), window{}},
		{"business hours", "nodes=0;schedule=0 9 * * 1-5;duration=8h", utc(30, 10, 0),
			window{utc(30, 9, 0), utc(30, 17, 0), true}},
		{"across midnight", "nodes=0;schedule=0 22 * * *;duration=4h", utc(30, 1, 0),
			window{utc(29, 22, 0), utc(30, 2, 0), true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustParse(t, tc.budget)
			start, end, ok := b.Window(tc.now)
			got := window{start, end, ok}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Window(%s) (-want +got):\n%s", tc.now, diff)
			}
		})
	}
}

// TestWindowTouching checks that a window reaching the next schedule time
// goes on into the next window.
func TestWindowTouching(t *testing.T) {
	b := mustParse(t, "nodes=0;schedule=0 9,13 * * *;duration=4h")
	start, end, ok := b.Window(utc(30, 10, 0))
	if diff := cmp.Diff([]any{utc(30, 9, 0), utc(30, 17, 0), true}, []any{start, end, ok}); diff != "" {
		t.Errorf("Window (-want +got):\n%s", diff)
	}
	start, end, ok = b.Window(utc(30, 14, 0))
	if diff := cmp.Diff([]any{utc(30, 13, 0), utc(30, 17, 0), true}, []any{start, end, ok}); diff != "" {
		t.Errorf("Window (-want +got):\n%s", diff)
	}
}

// TestWindowEndless checks that windows that always overlap (every 2 hours
// for 3 hours) end the search at its step cap, far in the future.
func TestWindowEndless(t *testing.T) {
	b := mustParse(t, "nodes=0;schedule=0 */2 * * *;duration=3h")
	start, end, ok := b.Window(utc(30, 1, 0))
	if !ok || !start.Equal(utc(30, 0, 0)) || end.Before(utc(30, 1, 0).AddDate(0, 0, 30)) {
		t.Errorf("Window = %s, %s, %v; want from %s to a month away or more", start, end, ok, utc(30, 0, 0))
	}
}
