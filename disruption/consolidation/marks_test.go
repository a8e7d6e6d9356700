package consolidation

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/taints"
)

func markedNode(name string, marked bool) *apiv1.Node {
	n := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiv1.NodeSpec{Taints: []apiv1.Taint{{Key: "dedicated", Value: "batch", Effect: apiv1.TaintEffectNoSchedule}}}}
	if marked {
		n.Spec.Taints = append(n.Spec.Taints, apiv1.Taint{Key: taints.ConsolidationCandidate, Effect: apiv1.TaintEffectPreferNoSchedule})
	}
	return n
}

// marksOf returns, per node of the cluster, its taint keys as stored.
func marksOf(t *testing.T, client *fake.Clientset) map[string][]string {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, n := range list.Items {
		out[n.Name] = []string{}
		for _, x := range n.Spec.Taints {
			out[n.Name] = append(out[n.Name], x.Key)
		}
	}
	return out
}

func TestMarksFollowThePlan(t *testing.T) {
	plan := MarkedNodes([]disruption.Candidate{{Nodes: []string{"wanted", "kept", "gone"}}})
	cases := []struct {
		name       string
		perLoop    int
		removeOnly bool
		want       map[string][]string
	}{
		{"all within the cap", 10, false, map[string][]string{
			"stale": {"dedicated"}, "wanted": {"dedicated", taints.ConsolidationCandidate},
			"kept": {"dedicated", taints.ConsolidationCandidate}, "other": {"dedicated"}}},
		{"removals first when capped", 1, false, map[string][]string{
			"stale": {"dedicated"}, "wanted": {"dedicated"},
			"kept": {"dedicated", taints.ConsolidationCandidate}, "other": {"dedicated"}}},
		{"remove only", 10, true, map[string][]string{
			"stale": {"dedicated"}, "wanted": {"dedicated"}, "kept": {"dedicated"}, "other": {"dedicated"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*apiv1.Node{markedNode("stale", true), markedNode("wanted", false), markedNode("kept", true),
				markedNode("other", false)}
			client := fake.NewClientset()
			for _, n := range nodes {
				if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			NewMarks(client, tc.perLoop, tc.removeOnly).Update(context.Background(), nodes, plan)
			if diff := cmp.Diff(tc.want, marksOf(t, client)); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarksLeaveANodeMarkedSinceAsItIs(t *testing.T) {
	// The loop's observation is older than the Node: it was marked in the
	// meantime; the write reads it fresh and adds no second taint.
	client := fake.NewClientset(markedNode("n", true))
	NewMarks(client, 10, false).Update(context.Background(), []*apiv1.Node{markedNode("n", false)}, map[string]bool{"n": true})
	if diff := cmp.Diff(map[string][]string{"n": {"dedicated", taints.ConsolidationCandidate}}, marksOf(t, client)); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
}

func TestMarksSkipACordonedNode(t *testing.T) {
	// The plan's node being drained is cordoned: no write for it, and the
	// cap's one write goes to the node that steers.
	cordoned := markedNode("a-draining", false)
	cordoned.Spec.Unschedulable = true
	client := fake.NewClientset(cordoned, markedNode("b-waiting", false))
	NewMarks(client, 1, false).Update(context.Background(), []*apiv1.Node{cordoned, markedNode("b-waiting", false)},
		map[string]bool{"a-draining": true, "b-waiting": true})
	want := map[string][]string{"a-draining": {"dedicated"}, "b-waiting": {"dedicated", taints.ConsolidationCandidate}}
	if diff := cmp.Diff(want, marksOf(t, client)); diff != "" {
		t.Errorf("taints (-want +got):\n%s", diff)
	}
}

func TestNilMarksWriteNothing(t *testing.T) {
	var m *Marks
	m.Update(context.Background(), []*apiv1.Node{markedNode("n", true)}, nil) // must not panic
}
