package clusterapi

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// set is a MachineSet of MachineDeployment md at revision rev ("" for none)
// with spec and status replicas (negative: field absent).
func set(name, md, rev string, spec, status int64) *obj {
	o := makeObj(kindMachineSet, "ns", name).owner(kindMachineDeployment, md)
	if rev != "" {
		o.ann(RevisionAnnotation, rev)
	}
	if spec >= 0 {
		o.replicas(spec)
	}
	if status >= 0 {
		o.set(status, "status", "replicas")
	}
	return o
}

func TestRollingOut(t *testing.T) {
	tests := []struct {
		name    string
		sets    []*obj
		want    string // a part of the reason; "" for none
		wantErr string
	}{
		{name: "no MachineSet", want: ""},
		{name: "only the newest", sets: []*obj{set("a", "md", "3", 4, 4)}, want: ""},
		{name: "older ones emptied", sets: []*obj{set("a", "md", "1", 0, 0), set("b", "md", "2", 0, 0), set("c", "md", "3", 2, 2)}, want: ""},
		{name: "older one with spec replicas", sets: []*obj{set("a", "md", "1", 1, 0), set("b", "md", "2", 3, 3)}, want: "ns/a of an older revision still has spec.replicas 1"},
		{name: "older one still with Machines", sets: []*obj{set("a", "md", "9", 0, 2), set("b", "md", "10", 3, 1)}, want: "ns/a of an older revision still has status.replicas 2"},
		{name: "no revision is never the newest", sets: []*obj{set("a", "md", "", 2, 2), set("b", "md", "1", 1, 1)}, want: "ns/a"},
		{name: "no revision anywhere, replicas", sets: []*obj{set("a", "md", "", 2, -1)}, want: "ns/a"},
		{name: "no revision anywhere, empty", sets: []*obj{set("a", "md", "", -1, -1)}, want: ""},
		{name: "revision not a number", sets: []*obj{set("a", "md", "one", 1, 1)}, wantErr: `revision "one" of MachineSet ns/a`},
		{name: "replicas not a number", sets: []*obj{set("a", "md", "1", 0, 0).set("two", "status", "replicas"), set("b", "md", "2", 1, 1)}, wantErr: "status.replicas of MachineSet ns/a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sets []*unstructured.Unstructured
			for _, o := range tc.sets {
				sets = append(sets, o.u)
			}
			got, err := rollingOut(sets)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("rollingOut = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPausedGroupsAreLeftOut: a MachineDeployment, MachineSet or MachinePool
// with the paused annotation (any value) is no node group, and the nodes of
// its Machines belong to no group (so nothing scales them down), while
// they keep their instance; the others are unaffected.
func TestPausedGroupsAreLeftOut(t *testing.T) {
	ctx := context.Background()
	p, _ := newProvider(t, nil,
		makeObj(kindMachineDeployment, "ns", "md-paused").sizes("0", "5").replicas(1).ann(PausedAnnotation, ""),
		set("md-paused-1", "md-paused", "1", 1, 1),
		machine("ns", "m1", "md-paused-1", "aws:///i-1", "n1"),
		makeObj(kindMachineDeployment, "ns", "md").sizes("0", "5").replicas(1),
		set("md-1", "md", "1", 1, 1),
		machine("ns", "m2", "md-1", "aws:///i-2", "n2"),
		makeObj(kindMachineSet, "ns", "ms-paused").sizes("0", "5").replicas(0).ann(PausedAnnotation, "true"),
		makeObj(kindMachinePool, "ns", "mp-paused").sizes("0", "5").replicas(0).ann(PausedAnnotation, "true"),
		makeObj(kindMachinePool, "ns", "mp").sizes("0", "5").replicas(0),
	)
	if diff := cmp.Diff([]string{"MachineDeployment/ns/md", "MachinePool/ns/mp"}, groupIDs(t, p)); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if g, err := p.NodeGroupForNode(ctx, node("n1", "aws:///i-1")); err != nil || g != nil {
		t.Errorf("group of the paused MachineDeployment's node = %v, %v; want none", g, err)
	}
	if g, err := p.NodeGroupForNode(ctx, node("n2", "aws:///i-2")); err != nil || g == nil || g.Id() != "MachineDeployment/ns/md" {
		t.Errorf("group of the other node = %v, %v", g, err)
	}
	if has, err := p.HasInstance(ctx, node("n1", "aws:///i-1")); err != nil || !has {
		t.Errorf("HasInstance of the paused group's node = %v, %v; want true", has, err)
	}
	if _, found, err := p.InstanceOfNode(ctx, node("n1", "aws:///i-1")); err != nil || found {
		t.Errorf("InstanceOfNode of the paused group's node: found %v, %v; want not found", found, err)
	}
}

// TestScaleDownBlockedWhileRollingOut: a MachineDeployment with a
// MachineSet of an older revision that still has replicas blocks
// scale-down, whether the MachineSet is its by owner or by label only; a
// settled one, and a MachineSet group, do not.
func TestScaleDownBlockedWhileRollingOut(t *testing.T) {
	ctx := context.Background()
	p, _ := newProvider(t, nil,
		makeObj(kindMachineDeployment, "ns", "rolling").sizes("0", "5").replicas(2),
		set("rolling-1", "rolling", "1", 1, 1),
		set("rolling-2", "rolling", "2", 2, 1),
		makeObj(kindMachineDeployment, "ns", "labelled").sizes("0", "5").replicas(2),
		makeObj(kindMachineSet, "ns", "labelled-1").label(DeploymentNameLabel, "labelled").ann(RevisionAnnotation, "1").set(int64(1), "status", "replicas"),
		set("labelled-2", "labelled", "2", 2, 2),
		makeObj(kindMachineDeployment, "ns", "settled").sizes("0", "5").replicas(2),
		set("settled-1", "settled", "1", 0, 0),
		set("settled-2", "settled", "2", 2, 2),
		makeObj(kindMachineSet, "ns", "alone").sizes("0", "5").replicas(1),
	)
	gs, err := p.NodeGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, g := range gs {
		b, ok := g.(cloudprovider.ScaleDownBlocker)
		if !ok {
			t.Fatalf("%s is no ScaleDownBlocker", g.Id())
		}
		got[g.Id()] = b.ScaleDownBlocked(ctx)
	}
	want := map[string]string{
		"MachineDeployment/ns/rolling":  "rolling out: MachineSet ns/rolling-1 of an older revision still has spec.replicas 1",
		"MachineDeployment/ns/labelled": "rolling out: MachineSet ns/labelled-1 of an older revision still has status.replicas 1",
		"MachineDeployment/ns/settled":  "",
		"MachineSet/ns/alone":           "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScaleDownBlocked (-want +got):\n%s", diff)
	}
}

// TestDeleteNodesRefusesPausedOrRollingOut: DeleteNodes reads the group as
// the API server has it now, not as the loop saw it: once it is paused, or
// a rollout has begun, nothing is marked and the replicas stay; once the
// rollout is over it deletes again.
func TestDeleteNodesRefusesPausedOrRollingOut(t *testing.T) {
	ctx := context.Background()
	objs := []*obj{
		makeObj(kindMachineDeployment, "ns", "md").sizes("0", "5").replicas(2),
		set("md-1", "md", "1", 2, 2),
		machine("ns", "m1", "md-1", "aws:///i-1", "n1"),
		machine("ns", "m2", "md-1", "aws:///i-2", "n2"),
	}
	victim := []*apiv1.Node{node("n1", "aws:///i-1")}
	tests := []struct {
		name    string
		change  func(t *testing.T, p *Provider)
		wantErr string
	}{
		{name: "paused since", change: func(t *testing.T, p *Provider) {
			u, err := p.client.Resource(p.gvr(kindMachineDeployment)).Namespace("ns").Get(ctx, "md", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			u.SetAnnotations(map[string]string{PausedAnnotation: "", MinSizeAnnotation: "0", MaxSizeAnnotation: "5"})
			if _, err := p.client.Resource(p.gvr(kindMachineDeployment)).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "MachineDeployment ns/md is paused (annotation cluster.x-k8s.io/paused)"},
		{name: "rollout begun since", change: func(t *testing.T, p *Provider) {
			if _, err := p.client.Resource(p.gvr(kindMachineSet)).Namespace("ns").Create(ctx,
				set("md-2", "md", "2", 1, 0).u, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "MachineDeployment ns/md is rolling out: MachineSet ns/md-1 of an older revision"},
		{name: "unchanged", change: func(*testing.T, *Provider) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, c := newProvider(t, nil, objs...)
			g := onlyGroup(t, p)
			if why := g.(cloudprovider.ScaleDownBlocker).ScaleDownBlocked(ctx); why != "" {
				t.Fatalf("blocked at Refresh: %s", why)
			}
			tc.change(t, p)
			err := g.DeleteNodes(ctx, victim)
			wantReplicas, wantMarked := int64(1), true
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				wantReplicas, wantMarked = 2, false
			} else if err != nil {
				t.Fatal(err)
			}
			if got := getReplicas(t, c, kindMachineDeployment, "ns", "md"); got != wantReplicas {
				t.Errorf("replicas = %d, want %d", got, wantReplicas)
			}
			if _, marked := machineAnnotations(t, c, "ns", "m1")[DeleteMachineAnnotation]; marked != wantMarked {
				t.Errorf("m1 marked = %v, want %v", marked, wantMarked)
			}
		})
	}
}

// TestDeleteNodesRefusesAPausedMachineSet: the paused check is not the
// MachineDeployments' alone.
func TestDeleteNodesRefusesAPausedMachineSet(t *testing.T) {
	ctx := context.Background()
	p, c := newProvider(t, nil,
		makeObj(kindMachineSet, "ns", "ms").sizes("0", "3").replicas(1),
		machine("ns", "m1", "ms", "aws:///i-1", "n1"),
	)
	g := onlyGroup(t, p)
	u, err := c.Resource(p.gvr(kindMachineSet)).Namespace("ns").Get(ctx, "ms", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := u.GetAnnotations()
	a[PausedAnnotation] = "true"
	u.SetAnnotations(a)
	if _, err := c.Resource(p.gvr(kindMachineSet)).Namespace("ns").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := g.DeleteNodes(ctx, []*apiv1.Node{node("n1", "aws:///i-1")}); err == nil || !strings.Contains(err.Error(), "MachineSet ns/ms is paused") {
		t.Fatalf("err = %v, want a refusal for the paused MachineSet", err)
	}
	if got := getReplicas(t, c, kindMachineSet, "ns", "ms"); got != 1 {
		t.Errorf("replicas = %d, want 1", got)
	}
}
