package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

const ns = "team"

// store is an in-memory cluster of buffers and PodTemplates that
// implements Buffers, Templates and StatusWriter, applying a status as the
// API server merges the controller's fields into the buffer.
type store struct {
	buffers   map[string]*v1.CapacityBuffer
	templates map[string]*apiv1.PodTemplate
	applied   int
	writes    []string // "create name" / "update name"
	createErr error
}

func newStore() *store {
	return &store{buffers: map[string]*v1.CapacityBuffer{}, templates: map[string]*apiv1.PodTemplate{}}
}

func (s *store) Get(namespace, name string) (*v1.CapacityBuffer, error) {
	if b, ok := s.buffers[namespace+"/"+name]; ok {
		return b, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "capacitybuffers"}, name)
}

func (s *store) List() ([]*v1.CapacityBuffer, error) {
	var out []*v1.CapacityBuffer
	for _, b := range s.buffers {
		out = append(out, b)
	}
	return out, nil
}

func (s *store) InNamespace(namespace string) ([]*v1.CapacityBuffer, error) {
	var out []*v1.CapacityBuffer
	for _, b := range s.buffers {
		if b.Namespace == namespace {
			out = append(out, b)
		}
	}
	return out, nil
}

func (s *store) ApplyStatus(_ context.Context, namespace, name string, st v1.CapacityBufferStatus) error {
	b, err := s.Get(namespace, name)
	if err != nil {
		return err
	}
	s.applied++
	var others []metav1.Condition
	for _, c := range b.Status.Conditions {
		if !ownedCondition(c.Type) {
			others = append(others, c)
		}
	}
	b.Status.PodTemplateRef, b.Status.Replicas = st.PodTemplateRef, st.Replicas
	b.Status.PodTemplateGeneration, b.Status.ProvisioningStrategy = st.PodTemplateGeneration, st.ProvisioningStrategy
	b.Status.Conditions = append(others, st.Conditions...)
	return nil
}

type templateStore struct{ *store }

func (s templateStore) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	if t, ok := s.templates[namespace+"/"+name]; ok {
		return t, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "podtemplates"}, name)
}

func (s templateStore) Create(_ context.Context, t *apiv1.PodTemplate) (*apiv1.PodTemplate, error) {
	if s.createErr != nil {
		return nil, s.createErr
	}
	t = t.DeepCopy()
	t.Generation = 1
	s.templates[t.Namespace+"/"+t.Name] = t
	s.writes = append(s.writes, "create "+t.Name)
	return t, nil
}

func (s templateStore) Update(_ context.Context, t *apiv1.PodTemplate) (*apiv1.PodTemplate, error) {
	t = t.DeepCopy()
	t.Generation++
	s.templates[t.Namespace+"/"+t.Name] = t
	s.writes = append(s.writes, "update "+t.Name)
	return t, nil
}

// scalables resolves scalableRefs by name.
type scalables map[string]Target

func (f scalables) Resolve(_ context.Context, _ string, ref v1.ScalableRef) (Target, error) {
	if t, ok := f[ref.Name]; ok {
		return t, nil
	}
	if ref.Name == "flaky" {
		return Target{}, errors.New("the API server is busy")
	}
	return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefNotFound, Message: ref.Name + " not found"}
}

// dryRun adds a memory request to every container, as a LimitRange would,
// and a token volume with a random name.
type dryRun struct {
	err   error
	calls int
}

func (d *dryRun) Resolve(_ context.Context, namespace string, t *apiv1.PodTemplateSpec) (*apiv1.Pod, error) {
	d.calls++
	if d.err != nil {
		return nil, d.err
	}
	pod := capacitybuffer.PodFromTemplate(namespace, t)
	pod.Name = fmt.Sprintf("capacity-buffer-dry-run-%d", d.calls)
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources.Requests[apiv1.ResourceMemory] = resource.MustParse("2Gi")
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, apiv1.Volume{Name: fmt.Sprintf("kube-api-access-%d", d.calls)})
	return pod, nil
}

func podSpec(cpu string) apiv1.PodTemplateSpec {
	return apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "main", Image: "web", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}}}
}

func (s *store) addTemplate(name, cpu string, generation int64) {
	s.templates[ns+"/"+name] = &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Generation: generation}, Template: podSpec(cpu)}
}

func (s *store) addBuffer(name string, spec v1.CapacityBufferSpec) *v1.CapacityBuffer {
	b := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
		Generation: 1, CreationTimestamp: metav1.Unix(1000, 0)}, Spec: spec}
	s.buffers[ns+"/"+name] = b
	return b
}

var start = time.Unix(5000, 0)

func newController(s *store, opts ...Option) (*Controller, *clocktesting.FakeClock, *record.FakeRecorder) {
	clk := clocktesting.NewFakeClock(start)
	rec := record.NewFakeRecorder(100)
	c := New(s, templateStore{s}, scalables{"web": {Replicas: 10, Template: podSpec("500m")}}, s,
		append([]Option{WithClock(clk), WithEventRecorder(rec)}, opts...)...)
	return c, clk, rec
}

func reconcile(t *testing.T, c *Controller, name string) {
	t.Helper()
	if err := c.Reconcile(context.Background(), ns+"/"+name); err != nil {
		t.Fatalf("reconciling %s: %v", name, err)
	}
}

func ready(t *testing.T, b *v1.CapacityBuffer) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(b.Status.Conditions, capacitybuffer.ConditionReadyForProvisioning)
	if c == nil {
		t.Fatalf("%s has no ReadyForProvisioning condition: %+v", b.Name, b.Status)
	}
	return c
}

func TestPodTemplateBufferIsTranslated(t *testing.T) {
	s := newStore()
	s.addTemplate("shape", "1", 3)
	b := s.addBuffer("spare", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](4),
		Limits: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("3")}})
	c, clk, rec := newController(s)
	reconcile(t, c, "spare")

	want := v1.CapacityBufferStatus{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](3),
		PodTemplateGeneration: ptr.To[int64](3), ProvisioningStrategy: ptr.To(capacitybuffer.StrategyActiveCapacity),
		Conditions: []metav1.Condition{{Type: capacitybuffer.ConditionReadyForProvisioning, Status: metav1.ConditionTrue,
			Reason: capacitybuffer.ReasonAttributesSetSuccessfully, ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(start),
			Message: "3 chunks of PodTemplate shape; 4 chunks capped to 3 by limits on cpu"}}}
	if diff := cmp.Diff(want, b.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if len(s.writes) != 0 {
		t.Errorf("template writes %v; the user's template is used as is", s.writes)
	}
	if ev := event(rec); !strings.HasPrefix(ev, "Normal ReadyForProvisioning 3 chunks") {
		t.Errorf("event %q", ev)
	}

	// Nothing changed: no write, no event; the transition time stays.
	clk.Step(time.Minute)
	reconcile(t, c, "spare")
	if s.applied != 1 || len(rec.Events) != 0 {
		t.Errorf("%d status writes, %d more events after an idle reconcile; want 1 and 0", s.applied, len(rec.Events))
	}
	// The template grows: fewer chunks fit the limits, same transition time.
	s.addTemplate("shape", "2", 4)
	reconcile(t, c, "spare")
	if *b.Status.Replicas != 1 || *b.Status.PodTemplateGeneration != 4 || !ready(t, b).LastTransitionTime.Time.Equal(start) {
		t.Errorf("after the template changed: replicas %d generation %d transition %v", *b.Status.Replicas,
			*b.Status.PodTemplateGeneration, ready(t, b).LastTransitionTime)
	}
}

func TestBadBuffersGetAReason(t *testing.T) {
	s := newStore()
	s.addTemplate("shape", "1", 1)
	s.addBuffer("missing-template", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "nope"}, Replicas: ptr.To[int32](1)})
	s.addBuffer("both", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"},
		ScalableRef: &v1.ScalableRef{Kind: "Deployment", APIGroup: "apps", Name: "web"}, Replicas: ptr.To[int32](1)})
	s.addBuffer("neither", v1.CapacityBufferSpec{Replicas: ptr.To[int32](1)})
	s.addBuffer("negative", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](-2)})
	s.addBuffer("missing-target", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{Kind: "Deployment", APIGroup: "apps",
		Name: "gone"}, Percentage: ptr.To[int32](10)})
	s.addBuffer("gpu-limits", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"},
		Limits: apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}})
	c, _, rec := newController(s)
	for name, want := range map[string][2]string{
		"missing-template": {capacitybuffer.ReasonPodTemplateNotFound, `PodTemplate "nope" not found`},
		"both":             {capacitybuffer.ReasonInvalidSpec, "not both"},
		"neither":          {capacitybuffer.ReasonInvalidSpec, "no pod shape"},
		"negative":         {capacitybuffer.ReasonInvalidSpec, "replicas is -2"},
		"missing-target":   {capacitybuffer.ReasonScalableRefNotFound, "gone not found"},
		"gpu-limits":       {capacitybuffer.ReasonInvalidSpec, "none of which a pod of the buffer requests"},
	} {
		reconcile(t, c, name)
		b := s.buffers[ns+"/"+name]
		cond := ready(t, b)
		if cond.Status != metav1.ConditionFalse || cond.Reason != want[0] || !strings.Contains(cond.Message, want[1]) {
			t.Errorf("%s: condition %s %s %q, want False %s mentioning %q", name, cond.Status, cond.Reason, cond.Message, want[0], want[1])
		}
		if b.Status.Replicas != nil || b.Status.PodTemplateRef != nil {
			t.Errorf("%s: a failed buffer keeps replicas %v and template %v", name, b.Status.Replicas, b.Status.PodTemplateRef)
		}
		if ev := event(rec); !strings.HasPrefix(ev, "Warning "+want[0]) {
			t.Errorf("%s: event %q", name, ev)
		}
	}

	// A buffer fixed by its user becomes ready, and says so.
	s.addTemplate("nope", "1", 1)
	s.buffers[ns+"/missing-template"].Generation = 2
	reconcile(t, c, "missing-template")
	if cond := ready(t, s.buffers[ns+"/missing-template"]); cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != 2 {
		t.Errorf("after the template appeared: %+v", cond)
	}
}

func TestTransientErrorsAreRetried(t *testing.T) {
	s := newStore()
	s.addBuffer("flaky", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{Kind: "Deployment", APIGroup: "apps",
		Name: "flaky"}, Replicas: ptr.To[int32](1)})
	c, _, _ := newController(s)
	if err := c.Reconcile(context.Background(), ns+"/flaky"); err == nil {
		t.Error("a transient error was not returned for a retry")
	}
	if s.applied != 0 {
		t.Error("a transient error was written as the buffer's status")
	}
	if err := c.Reconcile(context.Background(), ns+"/deleted"); err != nil {
		t.Errorf("a deleted buffer: %v", err)
	}
}

func TestScalableBufferKeepsATemplate(t *testing.T) {
	s := newStore()
	b := s.addBuffer("web-spare", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{APIGroup: "apps", Kind: "Deployment",
		Name: "web"}, Percentage: ptr.To[int32](15), Replicas: ptr.To[int32](1)})
	c, _, _ := newController(s)
	reconcile(t, c, "web-spare")
	name := capacitybuffer.ManagedTemplateName("web-spare")
	pt := s.templates[ns+"/"+name]
	if pt == nil || !metav1.IsControlledBy(pt, b) || pt.Template.Spec.Containers[0].Resources.Requests.Cpu().String() != "500m" {
		t.Fatalf("kept template %+v", pt)
	}
	// 15% of 10 replicas, rounded up: 2, more than the 1 of replicas.
	if cond := ready(t, b); cond.Status != metav1.ConditionTrue || *b.Status.Replicas != 2 || b.Status.PodTemplateRef.Name != name {
		t.Errorf("status %+v", b.Status)
	}
	reconcile(t, c, "web-spare")
	if diff := cmp.Diff([]string{"create " + name}, s.writes); diff != "" {
		t.Errorf("template writes (-want +got):\n%s", diff)
	}

	// A PodTemplate of that name the buffer does not own is left alone.
	s.templates[ns+"/"+name].OwnerReferences = nil
	reconcile(t, c, "web-spare")
	if cond := ready(t, b); cond.Reason != capacitybuffer.ReasonPodTemplateNotWritten {
		t.Errorf("foreign template: %+v", cond)
	}
	delete(s.templates, ns+"/"+name)
	s.createErr = apierrors.NewForbidden(schema.GroupResource{Resource: "podtemplates"}, name, errors.New("no"))
	reconcile(t, c, "web-spare")
	if cond := ready(t, b); cond.Reason != capacitybuffer.ReasonPodTemplateNotWritten || !strings.Contains(cond.Message, "forbidden") {
		t.Errorf("create refused: %+v", cond)
	}
}

func TestDryRunShapesThePod(t *testing.T) {
	s := newStore()
	s.addTemplate("shape", "1", 1)
	b := s.addBuffer("spare", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"},
		Limits: apiv1.ResourceList{apiv1.ResourceMemory: resource.MustParse("7Gi")}})
	dr := &dryRun{}
	c, _, _ := newController(s, WithDryRun(dr))
	reconcile(t, c, "spare")
	name := capacitybuffer.ManagedTemplateName("spare")
	// The dry-run's 2Gi memory request, limited to 7Gi: 3 chunks.
	if cond := ready(t, b); cond.Status != metav1.ConditionTrue || *b.Status.Replicas != 3 || b.Status.PodTemplateRef.Name != name {
		t.Fatalf("status %+v", b.Status)
	}
	pt := s.templates[ns+"/"+name]
	if got := pt.Template.Spec.Containers[0].Resources.Requests.Memory().String(); got != "2Gi" || len(pt.Template.Spec.Volumes) != 0 {
		t.Errorf("kept template: memory %s, volumes %v", got, pt.Template.Spec.Volumes)
	}
	// Another dry-run with another token volume name changes nothing.
	reconcile(t, c, "spare")
	if len(s.writes) != 1 || s.applied != 1 || dr.calls != 2 {
		t.Errorf("writes %v, status writes %d, dry-runs %d", s.writes, s.applied, dr.calls)
	}
	dr.err = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("cannot create pods"))
	reconcile(t, c, "spare")
	if cond := ready(t, b); cond.Reason != capacitybuffer.ReasonPodDryRunFailed || !strings.Contains(cond.Message, "cannot create pods") {
		t.Errorf("dry-run refused: %+v", cond)
	}
}

func TestOtherStrategiesAreLeftAlone(t *testing.T) {
	s := newStore()
	s.addTemplate("shape", "1", 1)
	b := s.addBuffer("warm", v1.CapacityBufferSpec{ProvisioningStrategy: ptr.To("example.com/warm-pool"),
		PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](1)})
	c, _, _ := newController(s)
	reconcile(t, c, "warm")
	if s.applied != 0 || len(b.Status.Conditions) != 0 {
		t.Errorf("a buffer of another strategy got status %+v", b.Status)
	}
}

func TestReconciliationMetric(t *testing.T) {
	s := newStore()
	s.addTemplate("shape", "1", 1)
	s.addBuffer("a", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](1)})
	fresh := s.addBuffer("b", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](1)})
	fresh.CreationTimestamp = metav1.Unix(2000, 0)
	restarted := s.addBuffer("c", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](1)})
	restarted.CreationTimestamp = metav1.Unix(10, 0)
	restarted.Status.Conditions = []metav1.Condition{{Type: capacitybuffer.ConditionReadyForProvisioning}}
	c, clk, _ := newController(s)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.Collector())
	clk.SetTime(time.Unix(6000, 0))
	reconcile(t, c, "a")
	clk.SetTime(time.Unix(7000, 0))
	// a reconciled at 6000; b never, created at 2000; c reconciled by an earlier process: left out.
	if diff := cmp.Diff(map[string]float64{"false": 6000, "true": 2000}, oldest(t, reg)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Deleted buffers are forgotten; with none left, both series say now.
	c.BufferHandler().OnDelete(s.buffers[ns+"/a"])
	s.buffers = map[string]*v1.CapacityBuffer{}
	if diff := cmp.Diff(map[string]float64{"false": 7000, "true": 7000}, oldest(t, reg)); diff != "" {
		t.Errorf("without buffers (-want +got):\n%s", diff)
	}
}

// oldest gathers the reconciliation gauge by its new_buffer label.
func oldest(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != OldestReconciliationMetric || f.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, m := range f.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// event returns the next recorded event, or "" when there is none.
func event(rec *record.FakeRecorder) string {
	select {
	case ev := <-rec.Events:
		return ev
	default:
		return ""
	}
}

// quotaList holds the ResourceQuotas of the namespace.
type quotaList []*apiv1.ResourceQuota

func (q quotaList) List(string) ([]*apiv1.ResourceQuota, error) { return q, nil }

func TestBuffersShareTheQuotas(t *testing.T) {
	s := newStore()
	s.addTemplate("shape", "1", 1)
	older := s.addBuffer("older", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](3)})
	newer := s.addBuffer("newer", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](3)})
	newer.CreationTimestamp = metav1.Unix(2000, 0)
	cpu := func(q string) apiv1.ResourceList { return apiv1.ResourceList{"requests.cpu": resource.MustParse(q)} }
	quota := &apiv1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "team-cpu", Namespace: ns},
		Spec: apiv1.ResourceQuotaSpec{Hard: cpu("6")}, Status: apiv1.ResourceQuotaStatus{Hard: cpu("6"), Used: cpu("1")}}
	c, _, _ := newController(s, WithQuotas(quotaList{quota}))
	reconcile(t, c, "older")
	reconcile(t, c, "newer")
	limited := func(b *v1.CapacityBuffer) *metav1.Condition {
		return meta.FindStatusCondition(b.Status.Conditions, capacitybuffer.ConditionLimitedByQuotas)
	}
	// 6 CPUs, 1 used: the older buffer gets its 3, the newer the 2 left.
	if l := limited(older); *older.Status.Replicas != 3 || l == nil || l.Status != metav1.ConditionFalse ||
		l.Reason != capacitybuffer.ReasonResourceQuotasAllocated {
		t.Errorf("older: replicas %d, LimitedByQuotas %+v", *older.Status.Replicas, l)
	}
	if l := limited(newer); *newer.Status.Replicas != 2 || l == nil || l.Status != metav1.ConditionTrue ||
		l.Message != "3 chunks limited to 2 by ResourceQuota team-cpu (requests.cpu)" {
		t.Errorf("newer: replicas %d, LimitedByQuotas %+v", *newer.Status.Replicas, l)
	}
	if cond := ready(t, newer); cond.Status != metav1.ConditionTrue {
		t.Errorf("a limited buffer is still ready: %+v", cond)
	}
	// The workload grows into the quota: the newer buffer shrinks to nothing.
	quota.Status.Used = cpu("4")
	reconcile(t, c, "newer")
	if *newer.Status.Replicas != 0 {
		t.Errorf("newer: %d replicas after the quota filled", *newer.Status.Replicas)
	}
	// Without a quota the condition goes.
	c.quotas = quotaList{}
	reconcile(t, c, "newer")
	if l := limited(newer); l != nil || *newer.Status.Replicas != 3 {
		t.Errorf("without quotas: replicas %d, LimitedByQuotas %+v", *newer.Status.Replicas, l)
	}
}
