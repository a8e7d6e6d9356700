package interruption

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// avoiding is the fake provider avoiding the groups it is told.
type avoiding struct {
	*fake.Provider
	avoided []cloudprovider.AvoidedGroup
}

func (a *avoiding) AvoidedGroups(now time.Time) []cloudprovider.AvoidedGroup {
	var out []cloudprovider.AvoidedGroup
	for _, g := range a.avoided {
		if now.Before(g.Until) {
			out = append(out, g)
		}
	}
	return out
}

// TestAvoidedGroupGivesNoReplacement: an interrupted node whose group the
// provider avoids is proposed without a replacement from it (its pods go
// to the capacity the scale-up picks), saying why; a node of a group not
// avoided keeps its replacement, and so does every node once the
// avoidance ended.
func TestAvoidedGroupGivesNoReplacement(t *testing.T) {
	w := newWorld(t)
	until := w.loop.Now.Add(time.Minute)
	p := &avoiding{Provider: w.provider, avoided: []cloudprovider.AvoidedGroup{{Group: "spot", ErrorCode: "SpotInterrupted", Until: until}}}
	w.source = New(w.src, p, prometheus.NewRegistry(), WithInFlight(func() map[string]disruption.Reason { return w.inFlight }))
	w.src.pending = []cloudprovider.InterruptionNotice{
		notice("m1/fake://n1", "fake://n1", "spot", cloudprovider.SpotInterruption, until),
		notice("m2/fake://n3", "fake://n3", "od", cloudprovider.ScheduledChange, until.Add(time.Hour)),
	}
	w.source.Poll(context.Background())
	got := w.source.Propose(context.Background(), w.loop)
	if len(got) != 2 {
		t.Fatalf("%d candidates, want 2", len(got))
	}
	if got[0].Nodes[0] != "n1" || len(got[0].Replacement) != 0 || !strings.Contains(got[0].Message, "avoided until") ||
		!strings.Contains(got[0].Message, "SpotInterrupted") {
		t.Errorf("avoided group's candidate %+v, want n1 without a replacement, saying it is avoided", got[0])
	}
	if got[1].Nodes[0] != "n3" || len(got[1].Replacement) != 1 || got[1].Replacement[0].Group != "od" {
		t.Errorf("other group's candidate %+v, want n3 replaced in od", got[1])
	}
	w.loop.Now = until
	got = w.source.Propose(context.Background(), w.loop)
	if len(got) != 2 || len(got[0].Replacement) != 1 || got[0].Replacement[0].Group != "spot" {
		t.Errorf("after the avoidance: %+v, want n1 replaced in spot again", got)
	}
}
