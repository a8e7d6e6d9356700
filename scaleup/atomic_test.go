package scaleup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// beginLoop updates the cluster state and starts a session, as the loop does.
func beginLoop(t *testing.T, o *Orchestrator, nodes []*apiv1.Node) *Session {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := o.state.Update(ctx, o.provider, nodes, now); err != nil {
		t.Fatal(err)
	}
	return o.Begin(ctx, Input{Now: now, Nodes: nodes})
}

func calls(p *fakeprovider.Provider, method string) []fakeprovider.Call {
	var out []fakeprovider.Call
	for _, c := range p.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func TestScaleUpAllOneGroup(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.AddNodeGroup("large", 0, 10, 0, templateNode("large", "16"))
	o := newOrchestrator(t, provider, func(o *Options) { o.MaxNodesPerScaleUp = 1 })
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(12, "1"), nil)
	if !res.Fit || res.Err != nil {
		t.Fatalf("result %+v, want a fit", res)
	}
	// least-waste: three 4-CPU nodes; --max-nodes-per-scaleup=1 does not cut an atomic request.
	if got := calls(provider, "AtomicIncreaseSize"); len(got) != 1 || got[0].Group != "small" || got[0].Delta != 3 {
		t.Errorf("AtomicIncreaseSize calls %+v, want small +3", got)
	}
	if len(res.Instances["small"]) != 3 {
		t.Errorf("instances %v, want the three new ones", res.Instances)
	}
}

func TestScaleUpAllSplitsOverGroups(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("a", 0, 2, 0, templateNode("a", "4"))
	provider.AddNodeGroup("b", 0, 3, 0, templateNode("b", "4"))
	o := newOrchestrator(t, provider, nil)
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(16, "1"), nil)
	if !res.Fit {
		t.Fatalf("result %+v, want a fit", res)
	}
	// Neither group holds four nodes: both are used.
	if got := increases(Result{Increases: res.Increases}); got["a"]+got["b"] != 4 || got["a"] == 0 || got["b"] == 0 {
		t.Errorf("increases %v, want four nodes over both groups", got)
	}
}

func TestScaleUpAllChangesNothingWhenItCannotFit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		target    int
		mutate    func(*Options)
		permanent bool
		reason    string
	}{
		{name: "larger than the group's max", target: 0, permanent: true,
			reason: "40 of 44 pods fit; 4 have no room: group a holds 40 of the 44 pods on 10 nodes; more would exceed its max size of 10 nodes"},
		{name: "group nearly full now", target: 9, permanent: false,
			reason: "4 of 36 pods fit; 32 have no room: group a holds 4 of the 36 pods on 1 node; more would exceed the 1 node its max size of 10 leaves room for"},
		{name: "max nodes total", target: 0, mutate: func(o *Options) { o.MaxNodesTotal = 3 }, permanent: true,
			reason: "12 of 16 pods fit; 4 have no room: group a holds 12 of the 16 pods on 3 nodes; more would exceed the 3 nodes --max-nodes-total leaves room for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("a", 0, 10, tc.target, templateNode("a", "4"))
			var nodes []*apiv1.Node
			for i := 0; i < tc.target; i++ {
				n := templateNode("a", "4")
				n.Name = "a-" + string(rune('0'+i))
				provider.AddNode("a", n)
				nodes = append(nodes, n)
				// each existing node is full
			}
			o := newOrchestrator(t, provider, tc.mutate)
			s := beginLoop(t, o, nodes)
			for _, n := range nodes {
				full := pendingPods(1, "4")[0]
				full.Name, full.UID = "full-"+n.Name, "full-"+n.UID
				if rest := s.Place(context.Background(), [][]*apiv1.Pod{{full}}, true); len(rest) != 0 {
					t.Fatal("could not fill an existing node")
				}
			}
			pods := pendingPods(44, "1") // eleven nodes, more than the max
			switch {
			case tc.target > 0:
				pods = pendingPods(36, "1") // nine nodes: within the max, not within the room left
			case tc.mutate != nil:
				pods = pendingPods(16, "1") // four nodes
			}
			res := s.ScaleUpAll(context.Background(), pods, nil)
			if res.Fit || len(res.Increases) != 0 || res.Permanent != tc.permanent || !strings.Contains(res.Reason, tc.reason) {
				t.Errorf("result fit=%v increases=%v permanent=%v reason=%q; want no fit, permanent=%v, reason with %q",
					res.Fit, res.Increases, res.Permanent, res.Reason, tc.permanent, tc.reason)
			}
			if c := calls(provider, "AtomicIncreaseSize"); len(c) != 0 {
				t.Errorf("increases made: %+v", c)
			}
		})
	}
}

func TestScaleUpAllRollsBackWhenALaterIncreaseFails(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	// most-pods prefers b (three nodes, 12 pods) and then needs a, which fails.
	provider.AddNodeGroup("a", 0, 2, 0, templateNode("a", "4"))
	provider.AddNodeGroup("b", 0, 3, 0, templateNode("b", "4"))
	provider.InjectError("AtomicIncreaseSize", "a", cloudprovider.ErrNotImplemented)
	provider.InjectError("IncreaseSize", "a", errors.New("quota exceeded"))
	o := newOrchestrator(t, provider, func(o *Options) { o.Expanders = []string{config.MostPodsExpander} })
	res := beginLoop(t, o, nil).ScaleUpAll(ctx, pendingPods(16, "1"), nil)
	if res.Fit || res.Err == nil || !strings.Contains(res.Reason, "quota exceeded") {
		t.Fatalf("result %+v, want the failure", res)
	}
	ngs, _ := provider.NodeGroups(ctx)
	for _, ng := range ngs {
		size, _ := ng.TargetSize(ctx)
		instances, _ := ng.Nodes(ctx)
		if size != 0 || len(instances) != 0 {
			t.Errorf("%s: target %d, %d instances after the rollback; want none", ng.Id(), size, len(instances))
		}
	}
	if c := calls(provider, "ForceDeleteNodes"); len(c) != 1 || c[0].Group != "b" || len(c[0].Nodes) != 3 {
		t.Errorf("deletions %+v, want b's three new instances by name", c)
	}
	// a fell back from AtomicIncreaseSize to IncreaseSize.
	if c := calls(provider, "IncreaseSize"); len(c) != 1 || c[0].Group != "a" {
		t.Errorf("IncreaseSize calls %+v, want the fallback on a", c)
	}
	// What is left of the failed increase is told from a's instances by
	// a's list from before it: without it, a rollback retried later would
	// take any instance of a for one of its own.
	if before, ok := res.Before["a"]; !ok || len(before) != 0 {
		t.Errorf("Before %v, want a's (empty) list of instances from before its failed increase", res.Before)
	}
}

// The attempt is handed to record before any increase, with each group's
// target sizes and its instances from before; when record fails, nothing
// is increased and the snapshot is as it was.
func TestScaleUpAllRecordsTheAttemptBeforeIncreasing(t *testing.T) {
	ctx := context.Background()
	// One group with one full node.
	setup := func() (*fakeprovider.Provider, *Session) {
		provider := fakeprovider.NewProvider()
		provider.AddNodeGroup("small", 0, 10, 1, templateNode("small", "4"))
		old := templateNode("small", "4")
		old.Name = "old"
		provider.AddNode("small", old)
		s := beginLoop(t, newOrchestrator(t, provider, nil), []*apiv1.Node{old})
		full := pendingPods(1, "4")[0]
		full.Name, full.UID = "full", "full"
		if rest := s.Place(ctx, [][]*apiv1.Pod{{full}}, true); len(rest) != 0 {
			t.Fatal("could not fill the old node")
		}
		return provider, s
	}
	provider, s := setup()
	var got []Planned
	increasesSeen := -1
	res := s.ScaleUpAll(ctx, pendingPods(8, "1"), func(_ context.Context, planned []Planned) error {
		got = planned
		increasesSeen = len(calls(provider, "AtomicIncreaseSize")) + len(calls(provider, "IncreaseSize"))
		return nil
	})
	if !res.Fit || len(res.Increases) != 1 {
		t.Fatalf("result %+v, want one increase", res)
	}
	if increasesSeen != 0 {
		t.Errorf("record saw %d increases made; want it called before any", increasesSeen)
	}
	if want := "[{small 1 3 [fake://old]}]"; fmt.Sprint(got) != want {
		t.Errorf("recorded %v, want %s", got, want)
	}

	// A record that cannot be written: no increase, no room taken.
	provider, s = setup()
	res = s.ScaleUpAll(ctx, pendingPods(8, "1"), func(context.Context, []Planned) error { return errors.New("etcd is down") })
	if res.Fit || res.Err == nil || !strings.Contains(res.Reason, "etcd is down") || len(res.Increases) != 0 {
		t.Fatalf("result %+v, want the record's failure and no increase", res)
	}
	if n := len(calls(provider, "AtomicIncreaseSize")) + len(calls(provider, "IncreaseSize")); n != 0 {
		t.Errorf("%d increases made after the record failed", n)
	}
	if s.Added() != 0 {
		t.Errorf("session added %d nodes", s.Added())
	}
	// The pods still have no room in the session: nothing was committed.
	if fit, _ := s.FitAll(ctx, [][]*apiv1.Pod{pendingPods(1, "1")}, false); fit {
		t.Error("a pod fits after the failed attempt: the snapshot kept its nodes")
	}
}

// A request for 2,000 nodes is not cut to --max-nodes-per-scaleup (1000 by
// default): it goes out whole in one AtomicIncreaseSize, or not at all.
func TestScaleUpAllIgnoresMaxNodesPerScaleUp(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("big", 0, 3000, 0, templateNode("big", "4"))
	o := newOrchestrator(t, provider, nil)
	if o.opts.MaxNodesPerScaleUp != 1000 {
		t.Fatalf("default --max-nodes-per-scaleup = %d, want 1000", o.opts.MaxNodesPerScaleUp)
	}
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(8000, "1"), nil)
	if !res.Fit {
		t.Fatalf("result %+v, want a fit", res.Reason)
	}
	if c := calls(provider, "AtomicIncreaseSize"); len(c) != 1 || c[0].Delta != 2000 {
		t.Errorf("AtomicIncreaseSize calls %+v, want one of 2000", c)
	}
	// The same request against a group whose max is 1,999 can never fit.
	provider = fakeprovider.NewProvider()
	provider.AddNodeGroup("big", 0, 1999, 0, templateNode("big", "4"))
	o = newOrchestrator(t, provider, nil)
	res = beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(8000, "1"), nil)
	if res.Fit || !res.Permanent || len(calls(provider, "AtomicIncreaseSize")) != 0 {
		t.Errorf("result fit=%v permanent=%v reason=%q; want a permanent refusal and no call", res.Fit, res.Permanent, res.Reason)
	}
}

// With a provider that lists new instances only later, as most clouds do,
// ScaleUpAll reports the instances listed before the increase and no new
// one; a rollback then cancels the instances never listed by decreasing the
// target, deletes by name those listed, and leaves behind nothing.
func TestScaleUpAllAndRollbackWithInstancesListedLater(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	g := provider.AddNodeGroup("small", 0, 10, 1, templateNode("small", "4"))
	old := templateNode("small", "4")
	old.Name = "old"
	provider.AddNode("small", old)
	o := newOrchestrator(t, provider, nil)
	s := beginLoop(t, o, []*apiv1.Node{old})
	// The old node is full: the request needs three new nodes.
	full := pendingPods(1, "4")[0]
	full.Name, full.UID = "full", "full"
	if rest := s.Place(ctx, [][]*apiv1.Pod{{full}}, true); len(rest) != 0 {
		t.Fatal("could not fill the old node")
	}
	provider.DelayListing(true)
	res := s.ScaleUpAll(ctx, pendingPods(12, "1"), nil)
	if !res.Fit || len(res.Increases) != 1 || res.Increases[0].To-res.Increases[0].From != 3 {
		t.Fatalf("result %+v, want one increase of 3", res)
	}
	if len(res.Instances["small"]) != 0 || fmt.Sprint(res.Before["small"]) != "[fake://old]" {
		t.Fatalf("instances %v before %v; want none listed yet and the old one before", res.Instances, res.Before)
	}
	listed := provider.ListNew("small", 1)
	left, err := o.Rollback(ctx, map[string]Undo{"small": {Instances: listed, Unlisted: 2}}, "test")
	if err != nil || len(left) != 0 {
		t.Fatalf("rollback left %v, err %v; want everything undone", left, err)
	}
	if size, _ := g.TargetSize(ctx); size != 1 {
		t.Errorf("target %d after the rollback, want 1 (the old node)", size)
	}
	if got := provider.ListNew("small", -1); len(got) != 0 {
		t.Errorf("instances %v were still created after the rollback", got)
	}
	instances, _ := g.Nodes(ctx)
	if len(instances) != 1 || instances[0].Id != "fake://old" {
		t.Errorf("instances %v, want only the old one", instances)
	}
	if c := calls(provider, "DecreaseTargetSize"); len(c) != 1 || c[0].Delta != -2 {
		t.Errorf("DecreaseTargetSize calls %+v, want one of -2", c)
	}
}

// Instances listed after the caller last looked are neither deleted (the
// rollback does not know their names) nor cancelled through the target
// (that would ask the cloud to drop listed instances): they are left for
// the caller to name.
func TestRollbackLeavesInstancesListedMeanwhile(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	g := provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	provider.DelayListing(true)
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	ids := provider.ListNew("small", -1)
	o := newOrchestrator(t, provider, nil)
	left, err := o.Rollback(ctx, map[string]Undo{"small": {Unlisted: 2}}, "test")
	if err != nil || left["small"].Unlisted != 2 || len(calls(provider, "DecreaseTargetSize")) != 0 {
		t.Fatalf("left %v err %v calls %v; want 2 left and no decrease", left, err, calls(provider, "DecreaseTargetSize"))
	}
	if left, err = o.Rollback(ctx, map[string]Undo{"small": {Instances: ids}}, "test"); err != nil || len(left) != 0 {
		t.Fatalf("left %v err %v after naming them", left, err)
	}
	if size, _ := g.TargetSize(ctx); size != 0 {
		t.Errorf("target %d, want 0", size)
	}
	// A group that is gone is reported as such and not left.
	left, err = o.Rollback(ctx, map[string]Undo{"gone": {Unlisted: 1}}, "test")
	if !errors.Is(err, ErrNodeGroupGone) || len(left) != 0 {
		t.Errorf("left %v err %v, want ErrNodeGroupGone and nothing left", left, err)
	}
}

// An instance the provider already deletes (an earlier rollback, cut short
// by a restart before it was recorded) is not deleted a second time; the
// others are.
func TestRollbackDoesNotDeleteTwice(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	g := provider.AddNodeGroup("small", 0, 10, 0, templateNode("small", "4"))
	if err := g.IncreaseSize(ctx, 2); err != nil {
		t.Fatal(err)
	}
	instances, _ := g.Nodes(ctx)
	provider.SetInstanceStatus("small", instances[0].Id, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting})
	o := newOrchestrator(t, provider, nil)
	left, err := o.Rollback(ctx, map[string]Undo{"small": {Instances: []string{instances[0].Id, instances[1].Id}}}, "test")
	if err != nil || len(left) != 0 {
		t.Fatalf("left %v err %v", left, err)
	}
	c := calls(provider, "ForceDeleteNodes")
	if len(c) != 1 || len(c[0].Nodes) != 1 || !strings.HasSuffix(instances[1].Id, "/"+c[0].Nodes[0]) {
		t.Errorf("deletions %+v, want only %s (the other one is being deleted already)", c, instances[1].Id)
	}
}

// A node group whose template is unknown now (a transient provider error,
// or a group built from its nodes that has none) might hold the pods: the
// refusal is not permanent.
func TestScaleUpAllIsNotPermanentWhileATemplateIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*fakeprovider.Provider)
	}{
		{name: "transient template error", setup: func(p *fakeprovider.Provider) {
			p.AddNodeGroup("big", 0, 10, 0, templateNode("big", "64"))
			p.InjectError("TemplateNodeInfo", "big", errors.New("API rate limited"))
		}},
		{name: "from-nodes group at size 0", setup: func(p *fakeprovider.Provider) {
			p.AddNodeGroup("big", 0, 10, 0, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			provider := fakeprovider.NewProvider()
			provider.AddNodeGroup("tiny", 0, 1, 0, templateNode("tiny", "2"))
			tc.setup(provider)
			o := newOrchestrator(t, provider, nil)
			res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(8, "1"), nil)
			if res.Fit || res.Permanent || !strings.Contains(res.Reason, "no template") {
				t.Errorf("fit=%v permanent=%v reason=%q; want a refusal that is not permanent and says why",
					res.Fit, res.Permanent, res.Reason)
			}
		})
	}
	// With every template known, the same request can never fit.
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("tiny", 0, 1, 0, templateNode("tiny", "2"))
	res := beginLoop(t, newOrchestrator(t, provider, nil), nil).ScaleUpAll(context.Background(), pendingPods(8, "1"), nil)
	if res.Fit || !res.Permanent {
		t.Errorf("fit=%v permanent=%v; want a permanent refusal", res.Fit, res.Permanent)
	}
}

// The reason an all-or-nothing request does not fit is a sentence per node
// group, in a stable order, with the numbers in place and the refusal of
// a group's new node named.
func TestScaleUpAllReasonNamesEachGroup(t *testing.T) {
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("a", 0, 10, 0, templateNode("a", "4"))
	provider.AddNodeGroup("b", 0, 0, 0, templateNode("b", "64"))
	o := newOrchestrator(t, provider, nil)
	res := beginLoop(t, o, nil).ScaleUpAll(context.Background(), pendingPods(2, "8"), nil)
	want := "none of the 2 pods fit: group a: the pods do not fit on a new node of it (Insufficient cpu); group b is at its max size of 0 nodes"
	if res.Fit || res.Reason != want {
		t.Errorf("reason %q, want %q", res.Reason, want)
	}
}

// An atomic increase that took effect but answered with a timeout, after
// which the cloud API stops answering TargetSize: its outcome is unknown,
// so its instances are undone with the attempt, not left as orphans (the
// old code counted them as never made and did not delete them).
func TestScaleUpAllUndoesAnIncreaseOfUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	provider := fakeprovider.NewProvider()
	provider.AddNodeGroup("a", 0, 10, 0, templateNode("a", "4"))
	o := newOrchestrator(t, provider, nil)
	s := beginLoop(t, o, nil)
	provider.InjectIncreaseError("a", context.DeadlineExceeded, 1, true)
	provider.InjectErrorAfter("AtomicIncreaseSize", "TargetSize", "a", fmt.Errorf("simulated: %w", cloudprovider.ErrTransient))
	res := s.ScaleUpAll(ctx, pendingPods(12, "1"), nil)
	if res.Fit || res.Err == nil {
		t.Fatalf("result %+v, want the failure", res)
	}
	if c := calls(provider, "AtomicIncreaseSize"); len(c) != 1 {
		t.Errorf("AtomicIncreaseSize calls %+v, want one: asking again could double it", c)
	}
	ngs, _ := provider.NodeGroups(ctx)
	instances, _ := ngs[0].Nodes(ctx)
	left := len(res.Left["a"].Instances) + res.Left["a"].Unlisted
	if len(instances) != 0 && left < len(instances) {
		t.Errorf("%d instances of the failed attempt neither deleted nor left to undo (left %+v)", len(instances)-left, res.Left)
	}
}
