package scaledown

import (
	"context"
	"strconv"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func candidateTainted(t *testing.T, c *fake.Clientset, name string) bool {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, ok := taintTime(n, DeletionCandidateTaint)
	return ok
}

// --max-bulk-soft-taint-time and --max-bulk-soft-taint-count share one
// budget per loop; removals of the taint go first.
func TestSoftTaintBudget(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		count                    int
		budget                   time.Duration
		wantUnmarked, wantMarked int
	}{
		{"plenty", 10, time.Minute, 2, 4},
		{"time for three writes (one second each)", 10, 3 * time.Second, 2, 1},
		{"count of three", 3, time.Minute, 2, 1},
		{"time for one write", 10, time.Second, 1, 0},
	} {
		clk := clocktesting.NewFakePassiveClock(t0)
		client := fake.NewClientset()
		client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			clk.SetTime(clk.Now().Add(time.Second)) // each write takes a second
			return false, nil, nil
		})
		var mark []*Candidate
		var unmark []*apiv1.Node
		for i := 0; i < 6; i++ {
			n := node("n" + strconv.Itoa(i))
			if i < 2 {
				n.Spec.Taints = []apiv1.Taint{{Key: DeletionCandidateTaint, Value: "1", Effect: apiv1.TaintEffectPreferNoSchedule}}
				unmark = append(unmark, n)
			} else {
				mark = append(mark, &Candidate{Node: n, Since: t0})
			}
			if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		NewTaints(client, tc.count, false, WithSoftTaintTime(tc.budget, clk)).UpdateCandidates(context.Background(), mark, unmark)
		unmarked, marked := 0, 0
		for _, n := range unmark {
			if !candidateTainted(t, client, n.Name) {
				unmarked++
			}
		}
		for _, c := range mark {
			if candidateTainted(t, client, c.Node.Name) {
				marked++
			}
		}
		if unmarked != tc.wantUnmarked || marked != tc.wantMarked {
			t.Errorf("%s: %d unmarked and %d marked, want %d and %d", tc.name, unmarked, marked, tc.wantUnmarked, tc.wantMarked)
		}
	}
}

// --node-deletion-candidate-ttl: a candidate taint older than the TTL left
// by an earlier run is not trusted; its timer restarts and the taint gets
// the new time. Younger ones keep their time.
func TestNodeDeletionCandidateTTL(t *testing.T) {
	for _, tc := range []struct {
		ttl       time.Duration
		age       time.Duration
		wantSince time.Time
	}{
		{time.Hour, 2 * time.Hour, t0},
		{time.Hour, 30 * time.Minute, t0.Add(-30 * time.Minute)},
		{0, 2 * time.Hour, t0.Add(-2 * time.Hour)},
	} {
		f := newFixture(t, 0, map[string]string{"a": ""}, func(o *fixtureOptions) { o.NodeDeletionCandidateTTL = tc.ttl })
		n, _ := f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
		n.Spec.Taints = []apiv1.Taint{{Key: DeletionCandidateTaint, Value: strconv.FormatInt(t0.Add(-tc.age).Unix(), 10),
			Effect: apiv1.TaintEffectPreferNoSchedule}}
		if _, err := f.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		plan := f.plan(t, t0)
		if len(plan.Unneeded) != 1 || !plan.Unneeded[0].Since.Equal(tc.wantSince) {
			t.Fatalf("ttl %v, taint %v old: unneeded %v", tc.ttl, tc.age, plan.Unneeded)
		}
		n, _ = f.client.CoreV1().Nodes().Get(context.Background(), "a", metav1.GetOptions{})
		if got, _ := taintTime(n, DeletionCandidateTaint); !got.Equal(tc.wantSince) {
			t.Errorf("ttl %v, taint %v old: the taint says %v, want %v", tc.ttl, tc.age, got, tc.wantSince)
		}
	}
}

// At start-up the ToBeDeleted taints of managed nodes are lifted, but for
// a node whose instance the provider is deleting already (the previous
// run's deletion reached the cloud): pods must not land on it meanwhile.
func TestLeftToBeDeletedKeepsNodesBeingDeleted(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, nil)
	toBeDeleted := apiv1.Taint{Key: ToBeDeletedTaint, Value: "1", Effect: apiv1.TaintEffectNoSchedule}
	going, drained, plain := node("going", toBeDeleted), node("drained", toBeDeleted), node("plain")
	for _, n := range []*apiv1.Node{going, drained, plain} {
		p.AddNode("g", n)
	}
	foreign := node("foreign", toBeDeleted) // in no node group
	p.SetInstanceStatus("g", going.Spec.ProviderID, &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting})
	got := LeftToBeDeleted(context.Background(), p, []*apiv1.Node{going, drained, plain, foreign})
	if len(got) != 1 || got[0] != drained {
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		t.Errorf("taints to lift on %v, want only drained's", names)
	}
}

// WithoutCandidateWrites (the explain command) neither writes nor removes
// a DeletionCandidate taint: no request reaches the API server.
func TestWithoutCandidateWritesSendsNoRequest(t *testing.T) {
	client := fake.NewClientset()
	tainted, plain := node("tainted"), node("plain")
	tainted.Spec.Taints = []apiv1.Taint{{Key: DeletionCandidateTaint, Value: "1", Effect: apiv1.TaintEffectPreferNoSchedule}}
	for _, n := range []*apiv1.Node{tainted, plain} {
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
	NewTaints(client, 10, false, WithoutCandidateWrites()).UpdateCandidates(context.Background(),
		[]*Candidate{{Node: plain, Since: t0}}, []*apiv1.Node{tainted})
	if got := client.Actions(); len(got) != 0 {
		t.Errorf("requests %v, want none", got)
	}
}
