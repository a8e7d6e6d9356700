package scaledown

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// eventLog is an EventRecorder that keeps "Kind/name Type Reason message".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(o runtime.Object, kind, reason, msg string) {
	var who string
	switch v := o.(type) {
	case *apiv1.Node:
		who = "Node/" + v.Name
	case *apiv1.Pod:
		who = "Pod/" + v.Namespace + "/" + v.Name
	default:
		who = fmt.Sprintf("%T", o)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, strings.Join([]string{who, kind, reason, msg}, " "))
}

func (l *eventLog) Eventf(o runtime.Object, kind, reason, format string, args ...any) {
	l.Event(o, kind, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(o runtime.Object, _ map[string]string, kind, reason, format string, args ...any) {
	l.Eventf(o, kind, reason, format, args...)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// removeWithEvents removes the named node of a fresh fixture and returns the
// events recorded; refuse, when set, answers every eviction.
func removeWithEvents(t *testing.T, nodes map[string]string, name string, refuse error, opts func(*Options)) []string {
	t.Helper()
	f, a := actuatorFixture(t, 0, nodes, opts)
	rec := &eventLog{}
	a.recorder = rec
	if refuse != nil {
		f.refuseEvictions(refuse, nil)
	}
	var cs []*Candidate
	for _, c := range f.candidates(t) {
		if c.Node.Name == name {
			cs = append(cs, c)
		}
	}
	if len(cs) != 1 {
		t.Fatalf("%s is not removable", name)
	}
	a.Remove(context.Background(), cs)
	waitDone(t, a)
	return rec.all()
}

// The events of scale-down on Nodes and Pods, with upstream's reasons and
// messages: ScaleDown (never ScaleDownEmpty) on a removed empty Node, and
// ScaleDownFailed on a Pod whose eviction failed.
func TestScaleDownEvents(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "p-a", fmt.Errorf("no"))
	for _, tc := range []struct {
		name   string
		nodes  map[string]string
		remove string
		refuse error
		opts   func(*Options)
		want   []string
	}{{
		name: "empty node removed", nodes: map[string]string{"a": ""}, remove: "a",
		want: []string{
			"Node/a Normal ScaleDown marked the node as toBeDeleted/unschedulable",
			"Node/a Normal ScaleDown nodes removed by cluster autoscaler",
		},
	}, {
		// The fake API has no pod p-a: its eviction answers NotFound, gone already.
		name: "occupied node drained and removed", nodes: map[string]string{"a": "1", "b": ""}, remove: "a",
		want: []string{
			"Node/a Normal ScaleDown marked the node as toBeDeleted/unschedulable",
			"Node/a Normal ScaleDown nodes removed by cluster autoscaler",
		},
	}, {
		name: "eviction refused", nodes: map[string]string{"a": "1", "b": ""}, remove: "a", refuse: forbidden,
		want: []string{
			"Node/a Normal ScaleDown marked the node as toBeDeleted/unschedulable",
			"Pod/default/p-a Warning ScaleDownFailed failed to delete pod for ScaleDown",
			"Node/a Warning ScaleDownFailed failed to drain and delete node: draining failed: evicting pod default/p-a: " + forbidden.Error(),
		},
	}, {
		name: "eviction still refused by a PDB at --max-pod-eviction-time", nodes: map[string]string{"a": "1", "b": ""}, remove: "a",
		refuse: apierrors.NewTooManyRequests("a PDB refuses", 1),
		opts:   func(o *Options) { o.MaxPodEvictionTime = 200 * time.Millisecond },
		want: []string{
			"Node/a Normal ScaleDown marked the node as toBeDeleted/unschedulable",
			"Pod/default/p-a Warning ScaleDownFailed failed to delete pod for ScaleDown",
			"Node/a Warning ScaleDownFailed failed to drain and delete node: draining failed: evicting pod default/p-a: a PDB refuses",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := removeWithEvents(t, tc.nodes, tc.remove, tc.refuse, tc.opts)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// The start-up clean-up records upstream's ClusterAutoscalerCleanup on each
// node whose leftover deletion taint it removed (Normal) or could not
// remove (Warning), and nothing on a node without the taint.
func TestCleanUpEvents(t *testing.T) {
	toBeDeleted := apiv1.Taint{Key: ToBeDeletedTaint, Value: "1", Effect: apiv1.TaintEffectNoSchedule}
	left, stuck, plain := node("left", toBeDeleted), node("stuck", toBeDeleted), node("plain")
	client := fake.NewClientset(left, stuck, plain)
	refused := apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "stuck", fmt.Errorf("no"))
	client.PrependReactor("update", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.(clienttesting.UpdateAction).GetObject().(*apiv1.Node).Name == "stuck" {
			return true, nil, refused
		}
		return false, nil, nil
	})
	rec := &eventLog{}
	if n := NewTaints(client, 10, false).CleanUp(context.Background(), []*apiv1.Node{left, stuck, plain}, rec); n != 1 {
		t.Errorf("cleaned %d nodes, want 1", n)
	}
	want := []string{
		"Node/left Normal ClusterAutoscalerCleanup removed ToBeDeletedByClusterAutoscaler taint from node left",
		"Node/stuck Warning ClusterAutoscalerCleanup failed to clean ToBeDeletedByClusterAutoscaler on node stuck: " +
			"removing the deletion taint of node stuck: " + refused.Error(),
	}
	if diff := cmp.Diff(want, rec.all()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
