package clusterstate

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// statusAt is a status probed at now, its group's scale-down candidates
// candidates, its transitions at since.
func statusAt(now, since time.Time, candidates int) *Status {
	probe, trans := metav1.NewTime(now), metav1.NewTime(since)
	down := ScaleDownStatus{Status: ScaleDownNoCandidates, LastProbeTime: probe, LastTransitionTime: trans}
	if candidates > 0 {
		down.Status, down.Candidates = ScaleDownCandidatesPresent, candidates
	}
	return &Status{Time: now.Format(StatusTimeLayout), AutoscalerStatus: AutoscalerRunning,
		ClusterWide: ClusterStatus{
			Health:    ClusterHealth{Status: HealthHealthy, LastProbeTime: probe, LastTransitionTime: trans},
			ScaleUp:   ClusterScaleUp{Status: ScaleUpNoActivity, LastProbeTime: probe, LastTransitionTime: trans},
			ScaleDown: down,
		},
		NodeGroups: []NodeGroupStat{{Name: "pool-a",
			Health:    NodeGroupHealth{Status: HealthHealthy, MinSize: 1, MaxSize: 5, LastProbeTime: probe, LastTransitionTime: trans},
			ScaleUp:   ScaleUpStatus{Status: ScaleUpNoActivity, LastProbeTime: probe, LastTransitionTime: trans},
			ScaleDown: down,
		}}}
}

// writes counts the ConfigMap reads and writes the client saw since the
// last call.
func writes(c *fake.Clientset) (reads, written int) {
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "get":
			reads++
		case "create", "update":
			written++
		}
	}
	c.ClearActions()
	return reads, written
}

func statusCM(t *testing.T, c *fake.Clientset) *apiv1.ConfigMap {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.ClearActions()
	return cm
}

func TestStatusWriterSkipsWritesThatOnlyChangeTimes(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	w := &StatusWriter{Client: c, Namespace: "kube-system", Name: "status"}
	if err := w.WriteInitializing(ctx, t0); err != nil {
		t.Fatal(err)
	}
	writes(c)
	since := t0
	write := func(at time.Time, candidates int, unremovable ...UnremovableNode) (reads, written int) {
		t.Helper()
		if err := w.Write(ctx, statusAt(at, since, candidates), unremovable...); err != nil {
			t.Fatal(err)
		}
		return writes(c)
	}
	// Running after Initializing: a change, written (updating the
	// ConfigMap it created, without reading it).
	if r, n := write(t0.Add(time.Second), 0); r != 0 || n != 1 {
		t.Fatalf("first loop: %d reads, %d writes; want 0, 1", r, n)
	}
	// Loops a second apart with nothing but times changing: skipped while
	// the last write is younger than 10 s at the next loop.
	for s := 2; s <= 11; s++ {
		_, n := write(t0.Add(time.Duration(s)*time.Second), 0)
		if want := map[bool]int{true: 1, false: 0}[s == 11]; n != want {
			t.Errorf("loop at +%ds: %d writes, want %d", s, n, want)
		}
	}
	if got := statusCM(t, c).Annotations[LastUpdatedAnnotation]; got != t0.Add(11*time.Second).Format(StatusTimeLayout) {
		t.Errorf("last-updated %q, want +11s's", got)
	}
	// Any real change is written at once: candidates, a transition time,
	// the unremovable nodes.
	if _, n := write(t0.Add(12*time.Second), 1); n != 1 {
		t.Errorf("changed candidates: %d writes, want 1", n)
	}
	since = t0.Add(13 * time.Second)
	if _, n := write(t0.Add(13*time.Second), 1); n != 1 {
		t.Errorf("changed transition time: %d writes, want 1", n)
	}
	un := UnremovableNode{Name: "n1", Reason: "NotUnderutilized"}
	if _, n := write(t0.Add(14*time.Second), 1, un); n != 1 {
		t.Errorf("new unremovable node: %d writes, want 1", n)
	}
	if _, n := write(t0.Add(15*time.Second), 1, un); n != 0 {
		t.Errorf("same unremovable node: %d writes, want 0", n)
	}
	if _, n := write(t0.Add(16*time.Second), 1); n != 1 {
		t.Errorf("unremovable node gone: %d writes, want 1", n)
	}
	// Loops as far apart as the bound: every one is written (as upstream).
	for s := 26; s <= 66; s += 10 {
		if _, n := write(t0.Add(time.Duration(s)*time.Second), 1); n != 1 {
			t.Errorf("loop at +%ds, 10 s after the last: %d writes, want 1", s, n)
		}
	}
	// Negative bound: every loop is written.
	w.RefreshAfter = -1
	if _, n := write(t0.Add(67*time.Second), 1); n != 1 {
		t.Errorf("RefreshAfter < 0: %d writes, want 1", n)
	}
}

// The ConfigMap a writer that skips leaves is, at every write, what a
// writer that writes every time leaves for the same status.
func TestStatusWriterContentAsWrittenEveryTime(t *testing.T) {
	ctx := context.Background()
	skipping, every := fake.NewClientset(), fake.NewClientset()
	ws := &StatusWriter{Client: skipping, Namespace: "kube-system", Name: "status",
		Sections: func() map[string]string { return map[string]string{"healing": "x: 1\n"} }}
	we := &StatusWriter{Client: every, Namespace: "kube-system", Name: "status", RefreshAfter: -1, Sections: ws.Sections}
	un := []UnremovableNode{{Name: "n1", Reason: "NotUnderutilized"}, {Name: "n2", Reason: "NoPlaceToMovePods", Detail: "d"}}
	for s := 1; s <= 30; s++ {
		at := t0.Add(time.Duration(s) * time.Second)
		st := statusAt(at, t0, s/7)
		for _, w := range []*StatusWriter{ws, we} {
			if err := w.Write(ctx, st, un[:s%3]...); err != nil {
				t.Fatal(err)
			}
		}
		got, want := statusCM(t, skipping), statusCM(t, every)
		if got.Annotations[LastUpdatedAnnotation] != want.Annotations[LastUpdatedAnnotation] {
			continue // skipped: the last write stands
		}
		if !mapsEqual(got.Data, want.Data) || !mapsEqual(got.Annotations, want.Annotations) {
			t.Errorf("+%ds: ConfigMap %v %v, want %v %v", s, got.Annotations, got.Data, want.Annotations, want.Data)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A write after someone else changed the ConfigMap (a conflict) or deleted
// it reads it again, keeping their labels, or creates it.
func TestStatusWriterRereadsAfterConflictOrDeletion(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	w := &StatusWriter{Client: c, Namespace: "kube-system", Name: "status"}
	if err := w.Write(ctx, statusAt(t0, t0, 0)); err != nil {
		t.Fatal(err)
	}
	cm := statusCM(t, c)
	cm.Labels = map[string]string{"owner": "someone"}
	if _, err := c.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	c.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "status", nil)
	})
	c.ClearActions()
	if err := w.Write(ctx, statusAt(t0.Add(time.Second), t0, 3)); err != nil {
		t.Fatal(err)
	}
	if r, n := writes(c); r != 1 || n != 2 {
		t.Errorf("after a conflict: %d reads, %d updates; want 1, 2", r, n)
	}
	cm = statusCM(t, c)
	if cm.Labels["owner"] != "someone" || cm.Annotations[LastUpdatedAnnotation] != t0.Add(time.Second).Format(StatusTimeLayout) {
		t.Errorf("after a conflict: labels %v, last-updated %q", cm.Labels, cm.Annotations[LastUpdatedAnnotation])
	}
	if err := c.CoreV1().ConfigMaps("kube-system").Delete(ctx, "status", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, statusAt(t0.Add(2*time.Second), t0, 4)); err != nil {
		t.Fatal(err)
	}
	if got := statusCM(t, c).Annotations[LastUpdatedAnnotation]; got != t0.Add(2*time.Second).Format(StatusTimeLayout) {
		t.Errorf("after a deletion: last-updated %q", got)
	}
}
