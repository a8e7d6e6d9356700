package cloudprovider_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

func node(name, providerID string) *apiv1.Node {
	return &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiv1.NodeSpec{ProviderID: providerID}}
}

// matcher is a provider with its own matching: Nodes named in ids are the
// given instances; nodes named in errs cannot be told.
type matcher struct {
	*fakeprovider.Provider
	ids  map[string]string
	errs map[string]bool
}

func (m matcher) InstanceOfNode(_ context.Context, n *apiv1.Node) (string, bool, error) {
	if m.errs[n.Name] {
		return "", false, errors.New("listing not synced")
	}
	id, ok := m.ids[n.Name]
	return id, ok, nil
}

// Identify matches the usual spellings of one provider ID for sure, makes
// a maybe of what only looks alike (case, last segment, node name), and
// leaves the rest unmatched.
func TestIdentifyByProviderID(t *testing.T) {
	listed := map[string][]cloudprovider.Instance{"g": {
		{Id: "aws:///us-east-1a/i-1"}, {Id: "azure:///subscriptions/s/resourceGroups/MC_RG/vm/VM2"},
		{Id: "gce://p/z/vm-3"}, {Id: "fake://i-4"}, {Id: "fake://i-5"}, {Id: "fake://i-6"},
	}}
	nodes := []*apiv1.Node{
		node("a", "aws://us-east-1a/i-1"),                                 // empty host omitted: sure
		node("b", "azure:///subscriptions/s/resourcegroups/mc_rg/vm/vm2"), // case differs: maybe
		node("c", "othercloud://x/vm-3"),                                  // same last segment: maybe
		node("i-4", ""),                                                   // no provider ID, name is the last segment: maybe
		node("e", "fake://i-5"),                                           // exact: sure
		node("f", "fake://elsewhere"),                                     // nothing alike
	}
	ids := cloudprovider.Identify(context.Background(), fakeprovider.NewProvider(), nodes, listed)
	for _, tc := range []struct {
		instance, node string
		m              cloudprovider.Match
	}{
		{"aws:///us-east-1a/i-1", "a", cloudprovider.SureMatch},
		{"azure:///subscriptions/s/resourceGroups/MC_RG/vm/VM2", "b", cloudprovider.MaybeMatch},
		{"gce://p/z/vm-3", "c", cloudprovider.MaybeMatch},
		{"fake://i-4", "i-4", cloudprovider.MaybeMatch},
		{"fake://i-5", "e", cloudprovider.SureMatch},
		{"fake://i-6", "", cloudprovider.NoMatch},
	} {
		if n, m := ids.NodeOf(tc.instance); n != tc.node || m != tc.m {
			t.Errorf("NodeOf(%s) = %q, %v; want %q, %v", tc.instance, n, m, tc.node, tc.m)
		}
	}
	if id, m := ids.MayBeListed("f"); m != cloudprovider.NoMatch {
		t.Errorf("node f may be %q (%v); want no instance", id, m)
	}
	if id, ok := ids.InstanceOf("a"); !ok || id != "aws:///us-east-1a/i-1" {
		t.Errorf("InstanceOf(a) = %q, %v", id, ok)
	}
}

// A provider's own matching wins: a Node it names an instance of is that
// instance for sure whatever its provider ID; a Node it cannot tell may be
// any instance that has no sure Node; a Node it says is none, though its ID
// equals an instance's, is only a maybe.
func TestIdentifyAsksTheProviderFirst(t *testing.T) {
	listed := map[string][]cloudprovider.Instance{"g": {{Id: "capi://ns/m1"}, {Id: "capi://ns/m2"}, {Id: "capi://ns/m3"}}}
	p := matcher{Provider: fakeprovider.NewProvider(), ids: map[string]string{"by-noderef": "capi://ns/m1"}}
	nodes := []*apiv1.Node{node("by-noderef", ""), node("denied", "capi://ns/m2")}
	ids := cloudprovider.Identify(context.Background(), p, nodes, listed)
	if n, m := ids.NodeOf("capi://ns/m1"); n != "by-noderef" || m != cloudprovider.SureMatch {
		t.Errorf("m1: %q %v, want the node its provider names, for sure", n, m)
	}
	if n, m := ids.NodeOf("capi://ns/m2"); n != "denied" || m != cloudprovider.MaybeMatch {
		t.Errorf("m2: %q %v, want a maybe", n, m)
	}
	if _, m := ids.NodeOf("capi://ns/m3"); m != cloudprovider.NoMatch {
		t.Errorf("m3: %v, want no node", m)
	}

	p.errs = map[string]bool{"unknown": true}
	ids = cloudprovider.Identify(context.Background(), p, append(nodes, node("unknown", "capi://ns/zzz")), listed)
	if n, m := ids.NodeOf("capi://ns/m3"); n != "unknown" || m != cloudprovider.MaybeMatch {
		t.Errorf("m3 with a node its provider cannot tell: %q %v, want a maybe", n, m)
	}
	if ids.Why("unknown") == "" {
		t.Error("no reason given for the unsure node")
	}
	if _, m := ids.NodeOf("capi://ns/m1"); m != cloudprovider.SureMatch {
		t.Errorf("m1 with an unsure node around: %v, want still sure", m)
	}
}

// A Node whose group the provider names, but none of whose instances it
// can pin, may be any instance of that group without a sure Node, and of
// no other group.
func TestIdentifyNodeOfAGroupButNoInstance(t *testing.T) {
	p := fakeprovider.NewProvider()
	p.AddNodeGroup("g", 0, 10, 0, nil)
	p.AddNodeGroup("h", 0, 10, 0, nil)
	member := node("member", "")
	p.AddNode("g", member) // the fake's group lookup finds it by "fake://member"
	listed := map[string][]cloudprovider.Instance{"g": {{Id: "other://x/abc"}}, "h": {{Id: "other://x/def"}}}
	ids := cloudprovider.Identify(context.Background(), p, []*apiv1.Node{member}, listed)
	if n, m := ids.NodeOf("other://x/abc"); n != "member" || m != cloudprovider.MaybeMatch {
		t.Errorf("instance of g: %q %v, want the group's unidentified node as a maybe", n, m)
	}
	if _, m := ids.NodeOf("other://x/def"); m != cloudprovider.NoMatch {
		t.Errorf("instance of h: %v, want no node", m)
	}
}

// Two Nodes that the provider names as one instance: neither is told apart.
func TestIdentifyTwoNodesOfOneInstance(t *testing.T) {
	listed := map[string][]cloudprovider.Instance{"g": {{Id: "x://a"}}}
	p := matcher{Provider: fakeprovider.NewProvider(), ids: map[string]string{"n1": "x://a", "n2": "x://a"}}
	ids := cloudprovider.Identify(context.Background(), p, []*apiv1.Node{node("n1", ""), node("n2", "")}, listed)
	if _, m := ids.MayBeListed("n2"); m != cloudprovider.MaybeMatch {
		t.Errorf("second node of one instance: %v, want a maybe", m)
	}
}

func TestNormalizeProviderID(t *testing.T) {
	for in, want := range map[string]string{
		"aws:///us-east-1a/i-1":  "aws://us-east-1a/i-1",
		"AWS://us-east-1a/i-1/":  "aws://us-east-1a/i-1",
		" kwok://n1 ":            "kwok://n1",
		"gce://p//z///n":         "gce://p/z/n",
		"plain-id/":              "plain-id",
		"azure:///x/RG/y":        "azure://x/RG/y",
		"":                       "",
		"fake:///zone/Instance1": "fake://zone/Instance1",
	} {
		if got := cloudprovider.NormalizeProviderID(in); got != want {
			t.Errorf("NormalizeProviderID(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkIdentify15000 matches 15,000 Nodes to the instances of 30
// groups, as the registry does every loop (docs/benchmarks.md).
func BenchmarkIdentify15000(b *testing.B) {
	listed := map[string][]cloudprovider.Instance{}
	var nodes []*apiv1.Node
	for i := 0; i < 15000; i++ {
		g := "group-" + strconv.Itoa(i%30)
		id := "aws:///us-east-1a/i-" + strconv.Itoa(1000000+i)
		listed[g] = append(listed[g], cloudprovider.Instance{Id: id})
		nodes = append(nodes, node("ip-10-0-"+strconv.Itoa(i), "aws://us-east-1a/i-"+strconv.Itoa(1000000+i)))
	}
	p := fakeprovider.NewProvider()
	b.ReportAllocs()
	for b.Loop() {
		ids := cloudprovider.Identify(context.Background(), p, nodes, listed)
		if !ids.Registered("aws:///us-east-1a/i-1000000") {
			b.Fatal("not matched")
		}
	}
}
