package kwok

import (
	"context"
	"math"
	"testing"

	"github.com/go-logr/logr"
	apiv1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// FuzzConfig feeds arbitrary text to the kwok provider as its config
// (either format; upstream's reads its template Nodes from the second
// input, as the text of its templates ConfigMap), then applies a --nodes
// value and a --node-group-auto-discovery spec made of the third input.
// It never panics, and a config it accepts keeps the promises the provider
// relies on: sizes in order, positive capacity, rates in 0..1, and Nodes
// that the API server would accept.
func FuzzConfig(f *testing.F) {
	const upstream = "apiVersion: v1alpha1\nreadNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: node.kubernetes.io/instance-type\n" +
		"nodes:\n  gpuConfig:\n    gpuLabelKey: example.com/gpu\n    availableGPUTypes: {t4: {}}\n"
	const docs = "apiVersion: v1\nkind: Node\nmetadata: {name: x, labels: {g: one}}\nstatus: {capacity: {cpu: '1', memory: 1Gi, pods: '10'}}\n---\n" +
		"apiVersion: v1\nkind: Node\nmetadata: {name: y, labels: {g: two}}\nstatus: {capacity: {cpu: '2', memory: 2Gi, pods: '10'}}\n"
	for _, s := range [][3]string{
		{sampleConfig, "", "0:5:small"},
		{sampleConfig, "", "kwok:pool=small"},
		{"nodeGroups: []", "", "1:3:extra"},
		{"nodeGroups: [{name: a, maxSize: 2, initialSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, " +
			"allocatable: {cpu: 500m}, labels: {a.example.com/b: c}, annotations: {x: y}}, " +
			"faults: {creationFailureRate: 0.5, neverRegisterRate: 1, listingDelay: 3s, foreignProviderID: true}, " +
			"options: {scaleDownUtilizationThreshold: 0.7, zeroOrMaxNodeScaling: true, maxNodeProvisionTime: 5m}}]", "", "kwok:a.example.com/b"},
		{"nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, labels: {'bad key!': v}}}]", "", ""},
		{"nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, allocatable: {memory: -1}}}]", "", ""},
		{"nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1, 'not a resource': 1}}}]", "", ""},
		{"nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, options: {scaleDownUtilizationThreshold: -3}}]", "", ""},
		{"nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, options: {scaleDownUnneededTime: -1m}}]", "", ""},
		{"nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, taints: [{key: 'a b', effect: NoSchedule}]}}]", "", ""},
		{"createQPS: -1\nworkers: -2\nnodeGroups: []", "", ""},
		{"nodeGroups: [{name: a, maxSize: 9223372036854775807, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}}]", "", "0:2147483647:a"},
		{upstream, upstreamTemplatesList, "kwok:team=a"},
		{"apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: g}\n", docs, "kwok:g"},
		{"apiVersion: v1alpha1\nnodegroups: {fromNodeAnnotationKey: pool}\n", "kind: List\nitems: [{metadata: {name: n, " +
			"annotations: {pool: Big_Pool, cluster-autoscaler.kwok.nodegroup/max-count: '-1'}}}]", ""},
		{"apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: g}\n", "kind: Node\nmetadata: {name: n, labels: {g: x, 'k/': v}}\n" +
			"status: {capacity: {cpu: 1, memory: 1, pods: 1}}", ""},
		{"apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: g}\n", "kind: Pod\n", ""},
		{"apiVersion: v1alpha1\nnodegroups: {fromNodeLabelKey: g}\n", "kind: Node\nmetadata: {name: n, labels: {g: x}}\n" +
			"spec: {taints: [{key: kwok-provider, value: 'true', effect: NoSchedule}]}\n" +
			"status: {capacity: {cpu: 1, memory: 1, pods: 1}}", ""},
		{"apiVersion: v1\n", "", ""},
		{"readNodesFrom: cluster\n", "", ""},
		{"{", "", ":"},
		{"", "", "kwok:"},
	} {
		f.Add([]byte(s[0]), s[1], s[2])
	}
	ctx := klog.NewContext(context.Background(), logr.Discard()) // no log line per renamed group
	f.Fuzz(func(t *testing.T, data []byte, templates, spec string) {
		var cfg *Config
		var err error
		if isUpstreamFormat(data) {
			cfg, err = translateUpstream(ctx, upstreamClient("templates", templates), "ns", data)
		} else {
			cfg, err = ParseConfig(data)
		}
		if err != nil {
			return
		}
		checkConfig(t, cfg, "accepted config")
		if err := cfg.MergeNodeSpecs([]string{spec}); err == nil {
			checkConfig(t, cfg, "after --nodes="+spec)
		}
		before := len(cfg.NodeGroups)
		if err := cfg.FilterByDiscovery([]string{spec}); err == nil {
			if len(cfg.NodeGroups) > before {
				t.Fatalf("--node-group-auto-discovery=%s added groups", spec)
			}
			checkConfig(t, cfg, "after --node-group-auto-discovery="+spec)
		}
	})
}

// checkConfig fails t unless cfg keeps every promise of a valid config.
func checkConfig(t *testing.T, cfg *Config, when string) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: "+format, append([]any{when}, args...)...)
	}
	if !(cfg.CreateQPS > 0) || math.IsInf(cfg.CreateQPS, 0) || cfg.Workers <= 0 {
		fail("createQPS %v and workers %d", cfg.CreateQPS, cfg.Workers)
	}
	if msgs := validation.IsQualifiedName(cfg.GPULabel); cfg.GPULabel != "" && len(msgs) > 0 {
		fail("gpuLabel %q: %v", cfg.GPULabel, msgs)
	}
	names := map[string]bool{}
	for _, g := range cfg.NodeGroups {
		if len(validation.IsDNS1123Label(g.Name)) > 0 || names[g.Name] {
			fail("group name %q", g.Name)
		}
		names[g.Name] = true
		if g.MinSize < 0 || g.MaxSize < g.MinSize || g.InitialSize < 0 || g.InitialSize > g.MaxSize {
			fail("group %s: sizes min %d max %d initial %d", g.Name, g.MinSize, g.MaxSize, g.InitialSize)
		}
		if !(g.PricePerHour >= 0) || math.IsInf(g.PricePerHour, 0) {
			fail("group %s: price %v", g.Name, g.PricePerHour)
		}
		fa := g.Faults
		for _, r := range []float64{fa.CreationFailureRate, fa.NeverRegisterRate} {
			if !(r >= 0 && r <= 1) {
				fail("group %s: rate %v", g.Name, r)
			}
		}
		if fa.RegistrationDelay.Duration < 0 || fa.ListingDelay.Duration < 0 || fa.OutOfCapacityAfter < 0 {
			fail("group %s: faults %+v", g.Name, fa)
		}
		for _, r := range []apiv1.ResourceName{apiv1.ResourceCPU, apiv1.ResourceMemory, apiv1.ResourcePods} {
			if q, ok := g.Template.Capacity[r]; !ok || q.Sign() <= 0 {
				fail("group %s: capacity %s %v", g.Name, r, g.Template.Capacity)
			}
		}
		for r, q := range g.Template.Allocatable {
			if c, ok := g.Template.Capacity[r]; ok && q.Cmp(c) > 0 {
				fail("group %s: allocatable %s above capacity", g.Name, r)
			}
		}
		if o := g.Options; o != nil {
			if u := o.ScaleDownUtilizationThreshold; u != nil && !(*u >= 0 && *u <= 1) {
				fail("group %s: utilization threshold %v", g.Name, *u)
			}
			for _, d := range []*Duration{o.ScaleDownUnneededTime, o.ScaleDownUnreadyTime} {
				if d != nil && d.Duration < 0 {
					fail("group %s: options %+v", g.Name, o)
				}
			}
			if d := o.MaxNodeProvisionTime; d != nil && d.Duration <= 0 {
				fail("group %s: maxNodeProvisionTime %v", g.Name, d.Duration)
			}
		}
		ng := &NodeGroup{cfg: g}
		if opts, err := ng.GetOptions(context.Background(), config.Defaults().NodeGroupDefaults); err == nil &&
			!(opts.ScaleDownUtilizationThreshold >= 0 && opts.ScaleDownUtilizationThreshold <= 1) {
			fail("group %s: options %+v", g.Name, opts)
		}
		if errs := nodeErrors(ng.newNode(g.Name + "-abcde")); len(errs) > 0 {
			fail("group %s creates Nodes the API server refuses: %v", g.Name, errs.ToAggregate())
		}
	}
}

// nodeErrors checks what the API server checks of the fields a config
// sets on a Node: its labels, annotations, taints and resource lists.
func nodeErrors(n *apiv1.Node) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range validation.IsDNS1123Subdomain(n.Name) {
		errs = append(errs, field.Invalid(meta.Child("name"), n.Name, msg))
	}
	errs = append(errs, metav1validation.ValidateLabels(n.Labels, meta.Child("labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(n.Annotations, meta.Child("annotations"))...)
	seen := map[string]bool{}
	for i, taint := range n.Spec.Taints {
		p := field.NewPath("spec", "taints").Index(i)
		for _, msg := range validation.IsQualifiedName(taint.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), taint.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(taint.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), taint.Value, msg))
		}
		if seen[taint.Key+":"+string(taint.Effect)] {
			errs = append(errs, field.Duplicate(p, taint.Key))
		}
		seen[taint.Key+":"+string(taint.Effect)] = true
	}
	for what, list := range map[string]apiv1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
		p := field.NewPath("status", what)
		for r, q := range list {
			for _, msg := range validation.IsQualifiedName(string(r)) {
				errs = append(errs, field.Invalid(p.Key(string(r)), r, msg))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p.Key(string(r)), q.String(), "must not be negative"))
			}
		}
	}
	return errs
}
