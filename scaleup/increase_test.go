package scaleup

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

var conflict = apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "kwok-provider-state",
	errors.New("the object has been modified; please apply your changes to the latest version"))

func backedOff(o *Orchestrator, id string) bool {
	for _, gs := range o.state.Groups() {
		if gs.NodeGroup.Id() == id {
			return gs.BackedOff
		}
	}
	return false
}

func targetOf(t *testing.T, p *fakeprovider.Provider, id string) int {
	t.Helper()
	ngs, _ := p.NodeGroups(context.Background())
	for _, ng := range ngs {
		if ng.Id() == id {
			n, err := ng.TargetSize(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no group %s", id)
	return 0
}

// A write conflict on the provider's side is retried within the loop; the
// group is neither backed off nor lost to the decision.
func TestTransientIncreaseErrorIsRetriedNotBackedOff(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.InjectIncreaseError("small", conflict, 2, false)
	o := newOrchestrator(t, provider, nil)
	res, err := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(10, "1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) != 0 || increases(res)["small"] != 3 || targetOf(t, provider, "small") != 3 {
		t.Fatalf("errors %v, increases %v, target %d; want small +3 after two conflicts", res.Errors, increases(res),
			targetOf(t, provider, "small"))
	}
	if backedOff(o, "small") {
		t.Error("a conflict backed the group off")
	}
}

// A transient error that outlasts the retries fails the increase for this
// loop only: no back-off, and the next loop scales up.
func TestPersistentTransientErrorNeverBacksOff(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.InjectIncreaseError("small", conflict, MaxIncreaseAttempts, false)
	o := newOrchestrator(t, provider, nil)
	now := time.Now()
	res, _ := runLoop(ctx, o, Input{Now: now, Pending: pendingPods(10, "1")})
	var ie *IncreaseError
	if len(res.Errors) != 1 || !errors.As(res.Errors[0], &ie) || !ie.Transient || len(res.Increases) != 0 {
		t.Fatalf("errors %v, increases %v; want one transient IncreaseError and no increase", res.Errors, increases(res))
	}
	if backedOff(o, "small") || len(o.state.Failures()) != 0 {
		t.Fatal("a transient error backed the group off")
	}
	res, _ = runLoop(ctx, o, Input{Now: now.Add(10 * time.Second), Pending: pendingPods(10, "1")})
	if increases(res)["small"] != 3 {
		t.Errorf("next loop: increases %v, want small +3", increases(res))
	}
}

// An increase that the cloud carried out but answered with an error (a
// timeout after the fact) is accounted for once and not asked for again.
func TestIncreaseThatTookEffectDespiteAnErrorCountsOnce(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.InjectIncreaseError("small", context.DeadlineExceeded, 1, true)
	o := newOrchestrator(t, provider, nil)
	res, _ := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(10, "1")})
	if got := targetOf(t, provider, "small"); got != 3 {
		t.Fatalf("target %d, want 3: the increase was asked for twice or not at all", got)
	}
	if increases(res)["small"] != 3 || len(res.Errors) != 0 {
		t.Errorf("increases %v, errors %v; want small +3 accounted, no error", increases(res), res.Errors)
	}
	if backedOff(o, "small") {
		t.Error("backed off")
	}
}

// A provider's verdict (out of capacity) backs the group off with the
// provider's code, and the pods go to the next group.
func TestOutOfResourcesIncreaseBacksOffWithItsCode(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("a-small", 0, 10, 0, templateNode("a-small", "4"))
	provider.AddNodeGroup("b-small", 0, 10, 0, templateNode("b-small", "4"))
	provider.InjectIncreaseError("a-small", cloudprovider.NewOutOfResourcesError("STOCKOUT", errors.New("zone full")), 5, false)
	provider.InjectIncreaseError("b-small", cloudprovider.NewOutOfResourcesError("STOCKOUT", errors.New("zone full")), 5, false)
	o := newOrchestrator(t, provider, func(o *Options) { o.Expanders = []string{config.RandomExpander} })
	res, _ := runLoop(ctx, o, Input{Now: time.Now(), Pending: pendingPods(10, "1")})
	if len(res.Errors) != 2 {
		t.Fatalf("errors %v, want both groups failed", res.Errors)
	}
	for _, id := range []string{"a-small", "b-small"} {
		if !backedOff(o, id) {
			t.Errorf("%s not backed off after a stock-out", id)
		}
	}
	for _, gs := range o.state.Groups() {
		if gs.BackoffReason.ErrorCode != "STOCKOUT" {
			t.Errorf("%s backed off with code %q, want STOCKOUT", gs.NodeGroup.Id(), gs.BackoffReason.ErrorCode)
		}
	}
	// Each group was asked once: a verdict is not retried.
	calls := 0
	for _, c := range provider.Calls() {
		if c.Method == "IncreaseSize" {
			calls++
		}
	}
	if calls != 2 {
		t.Errorf("%d IncreaseSize calls, want 2", calls)
	}
}

// unreadableTarget is a node group whose TargetSize fails at the calls
// listed in fail (counted from 1).
type unreadableTarget struct {
	cloudprovider.NodeGroup
	fail  map[int]bool
	calls int
}

func (g *unreadableTarget) TargetSize(ctx context.Context) (int, error) {
	g.calls++
	if g.fail[g.calls] {
		return 0, fmt.Errorf("simulated: %w", cloudprovider.ErrTransient)
	}
	return g.NodeGroup.TargetSize(ctx)
}

// An increase that took effect but answered with a timeout, around which
// the target size could not be read: the outcome is unknown, and asking
// again would double the increase. The kwok fault knobs (apiErrorRate with
// lostResponseRate) make this happen on the local control plane.
func TestUnknownOutcomeOfAnIncreaseIsNotAskedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail map[int]bool // the TargetSize calls that fail
	}{
		{"target unreadable before", map[int]bool{1: true}},
		{"target unreadable after", map[int]bool{2: true}},
		{"target unreadable after, several times", map[int]bool{2: true, 3: true, 4: true, 5: true, 6: true}},
	} {
		for _, atomic := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s,atomic=%v", tc.name, atomic), func(t *testing.T) {
				ctx := context.Background()
				provider := fakeprovider.NewProvider()
				provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
				provider.InjectIncreaseError("small", context.DeadlineExceeded, 1, true)
				ngs, _ := provider.NodeGroups(ctx)
				ng := &unreadableTarget{NodeGroup: ngs[0], fail: tc.fail}
				g := grow(ctx, ng, 3, atomic)
				if got := targetOf(t, provider, "small"); got > 3 {
					t.Fatalf("target %d after an increase of 3: it was asked for again (growth %+v)", got, g)
				}
				if got := targetOf(t, provider, "small"); g.Err == nil && g.Added != got {
					t.Errorf("growth %+v reports %d added without an error, the target is %d", g, g.Added, got)
				}
			})
		}
	}
}
