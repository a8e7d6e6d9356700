package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

func TestParseGroup(t *testing.T) {
	bs, err := ParseGroup(" nodes=1;reasons=expired | nodes=0;reasons=consolidatable;schedule=0 9 * * 1-5;duration=8h |")
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[0].String() != "nodes=1;reasons=expired" ||
		bs[1].String() != "nodes=0;reasons=consolidatable;schedule=0 9 * * 1-5;duration=8h0m0s" {
		t.Errorf("budgets %v", bs)
	}
	if bs, err := ParseGroup("  "); err != nil || len(bs) != 0 {
		t.Errorf("empty value: %v, %v; want no budget", bs, err)
	}
	for _, bad := range []string{"nodes=lots", "nodes=1;node-groups=^a$", "nodes=1 | reasons=expired", "nodes=1;reasons=sleepy"} {
		if _, err := ParseGroup(bad); err == nil {
			t.Errorf("%q parsed, want an error", bad)
		}
	}
}

// fixed answers n whatever is asked, and counts the questions.
type fixed struct{ n, asked int }

func (f *fixed) Allowed(string, disruption.Reason, int, int, time.Time) int {
	f.asked++
	return f.n
}

// TestPerGroup: a group's own budget, while active, holds for the reasons
// it names (the fallback is not asked); other reasons, other groups and an
// inactive window fall back; a value that does not parse falls back too; a
// failed read keeps the values read before.
func TestPerGroup(t *testing.T) {
	ctx := context.Background()
	monday10 := time.Date(2026, time.November, 30, 10, 0, 0, 0, time.UTC)
	sunday := time.Date(2026, time.November, 29, 10, 0, 0, 0, time.UTC)
	values := map[string]string{
		"one":    "nodes=1",
		"office": "nodes=0;reasons=consolidatable;schedule=0 9 * * 1-5;duration=8h | nodes=50%;reasons=drifted,interrupted",
		"bad":    "nodes=many",
		"blank":  " ",
	}
	var readErr error
	fb := &fixed{n: 7}
	p := NewPerGroup(fb, func(context.Context) (map[string]string, error) { return values, readErr })

	// Before the first Refresh: the fallback.
	if got := p.Allowed("one", disruption.Expired, 10, 0, monday10); got != 7 {
		t.Errorf("before Refresh: %d, want the fallback's 7", got)
	}
	p.Refresh(ctx, monday10)
	for _, tc := range []struct {
		name       string
		group      string
		reason     disruption.Reason
		nodes, dis int
		now        time.Time
		want       int
		fallback   bool
	}{
		{"group budget, voluntary", "one", disruption.Expired, 10, 0, monday10, 1, false},
		{"group budget less the nodes in flight", "one", disruption.Drifted, 10, 1, monday10, 0, false},
		{"a budget without reasons leaves interrupted to the fallback", "one", disruption.Interrupted, 10, 0, monday10, 7, true},
		{"in its window", "office", disruption.Consolidatable, 10, 0, monday10, 0, false},
		{"out of its window: the fallback", "office", disruption.Consolidatable, 10, 0, sunday, 7, true},
		{"a percentage, rounded up", "office", disruption.Drifted, 5, 1, sunday, 2, false},
		{"named involuntary reason", "office", disruption.Interrupted, 4, 0, sunday, 2, false},
		{"a reason it does not name", "office", disruption.Expired, 10, 0, monday10, 7, true},
		{"a value that does not parse", "bad", disruption.Expired, 10, 0, monday10, 7, true},
		{"blank", "blank", disruption.Expired, 10, 0, monday10, 7, true},
		{"no value", "elsewhere", disruption.Expired, 10, 0, monday10, 7, true},
	} {
		before := fb.asked
		if got := p.Allowed(tc.group, tc.reason, tc.nodes, tc.dis, tc.now); got != tc.want {
			t.Errorf("%s: allowed %d, want %d", tc.name, got, tc.want)
		}
		if asked := fb.asked > before; asked != tc.fallback {
			t.Errorf("%s: fallback asked %v, want %v", tc.name, asked, tc.fallback)
		}
	}
	if got := p.Own("office"); len(got) != 2 {
		t.Errorf("Own(office) = %v, want its 2 budgets", got)
	}

	// A failed read keeps what was read; a later read replaces it.
	readErr = errors.New("throttled")
	values = map[string]string{}
	p.Refresh(ctx, monday10.Add(time.Minute))
	if got := p.Allowed("one", disruption.Expired, 10, 0, monday10); got != 1 {
		t.Errorf("after a failed read: %d, want the group's 1 still", got)
	}
	readErr = nil
	p.Refresh(ctx, monday10.Add(2*time.Minute))
	if got := p.Allowed("one", disruption.Expired, 10, 0, monday10); got != 7 {
		t.Errorf("after the value went: %d, want the fallback's 7", got)
	}

	// Refresh reads once per loop time.
	reads := 0
	p = NewPerGroup(nil, func(context.Context) (map[string]string, error) { reads++; return nil, nil })
	p.Refresh(ctx, monday10)
	p.Refresh(ctx, monday10)
	p.Refresh(ctx, monday10.Add(time.Second))
	if reads != 2 {
		t.Errorf("%d reads for 2 loop times, want 2", reads)
	}
	// The nil fallback is the default budget: 10%, at least one.
	if got := p.Allowed("any", disruption.Drifted, 30, 0, monday10); got != 3 {
		t.Errorf("default fallback allowed %d of 30, want 3", got)
	}
}
