package capacitybuffers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// fakes holds buffers and templates in memory and records status writes.
type fakes struct {
	buffers   []*v1.CapacityBuffer
	templates map[string]*apiv1.PodTemplate
	applied   map[string]v1.CapacityBufferStatus
	listErr   error
}

func (f *fakes) List() ([]*v1.CapacityBuffer, error) { return f.buffers, f.listErr }

func (f *fakes) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	if t, ok := f.templates[namespace+"/"+name]; ok {
		return t, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "podtemplates"}, name)
}

func (f *fakes) ApplyStatus(_ context.Context, namespace, name string, st v1.CapacityBufferStatus) error {
	f.applied[namespace+"/"+name] = st
	for _, b := range f.buffers {
		if b.Namespace == namespace && b.Name == name {
			for _, c := range st.Conditions {
				meta.SetStatusCondition(&b.Status.Conditions, c)
			}
		}
	}
	return nil
}

func newFakes() *fakes {
	return &fakes{templates: map[string]*apiv1.PodTemplate{}, applied: map[string]v1.CapacityBufferStatus{}}
}

func (f *fakes) template(name, cpu string) {
	f.templates["ns/"+name] = &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c",
			Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu)}}}}}}}
}

// buffer adds a buffer the controller made ready with replicas of template;
// a negative replicas leaves it not ready for reason.
func (f *fakes) buffer(name, template string, replicas int32, notReady string) *v1.CapacityBuffer {
	b := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.Unix(int64(len(f.buffers)), 0)}}
	if notReady != "" {
		b.Status.Conditions = []metav1.Condition{{Type: capacitybuffer.ConditionReadyForProvisioning,
			Status: metav1.ConditionFalse, Reason: notReady}}
	} else {
		b.Status = v1.CapacityBufferStatus{PodTemplateRef: &v1.LocalObjectRef{Name: template}, Replicas: ptr.To(replicas),
			Conditions: []metav1.Condition{{Type: capacitybuffer.ConditionReadyForProvisioning, Status: metav1.ConditionTrue,
				Reason: capacitybuffer.ReasonAttributesSetSuccessfully}}}
	}
	f.buffers = append(f.buffers, b)
	return b
}

func realPods(n int) []*apiv1.Pod {
	out := make([]*apiv1.Pod, n)
	for i := range out {
		out[i] = &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("real-%d", i), Namespace: "ns",
			UID: types.UID(fmt.Sprintf("real-%d", i))}}
	}
	return out
}

var now = time.Unix(10000, 0)

func provisioningOf(b *v1.CapacityBuffer) *metav1.Condition {
	return meta.FindStatusCondition(b.Status.Conditions, capacitybuffer.ConditionProvisioning)
}

func TestInjectorAppendsReadyBuffersAfterRealPods(t *testing.T) {
	f := newFakes()
	f.template("shape", "1")
	spare := f.buffer("spare", "shape", 3, "")
	bad := f.buffer("bad", "", 0, capacitybuffer.ReasonPodTemplateNotFound)
	empty := f.buffer("empty", "shape", 0, "")
	lost := f.buffer("lost", "gone", 2, "")
	fresh := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "ns"}}
	other := f.buffer("other", "shape", 5, "")
	other.Spec.ProvisioningStrategy = ptr.To("example.com/warm")
	f.buffers = append(f.buffers, fresh)

	in := New(f, f, f)
	loop := &processors.Loop{Now: now}
	pods := realPods(2)
	got := in.ProcessPods(context.Background(), loop, pods)
	var names []string
	for _, p := range got {
		names = append(names, p.Name)
	}
	want := []string{"real-0", "real-1", "capacity-buffer-spare-1", "capacity-buffer-spare-2", "capacity-buffer-spare-3"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("pods (-want +got):\n%s", diff)
	}
	for _, p := range got[2:] {
		if !capacitybuffer.IsFakePod(p) || metav1.GetControllerOf(p).UID != spare.UID {
			t.Errorf("%s: fake %v, owner %v", p.Name, capacitybuffer.IsFakePod(p), metav1.GetControllerOf(p))
		}
	}
	if cap(pods) != 2 || len(pods) != 2 {
		t.Error("the input list was changed")
	}

	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{})
	for b, want := range map[*v1.CapacityBuffer][3]string{
		spare: {"True", capacitybuffer.ReasonFakePodsInjected, "3 pods injected"},
		bad:   {"False", capacitybuffer.ReasonNotReadyForProvisioning, "(PodTemplateNotFound)"},
		empty: {"False", capacitybuffer.ReasonBufferIsEmpty, "zero replicas"},
		lost:  {"False", capacitybuffer.ReasonFailedToGetPodTemplate, `PodTemplate "gone" not found`},
	} {
		c := provisioningOf(b)
		if c == nil || string(c.Status) != want[0] || c.Reason != want[1] || !strings.Contains(c.Message, want[2]) ||
			!c.LastTransitionTime.Time.Equal(now) {
			t.Errorf("%s: Provisioning %+v, want %v", b.Name, c, want)
		}
	}
	if _, ok := f.applied["ns/fresh"]; ok {
		t.Error("a buffer the controller has not looked at got a condition")
	}
	if _, ok := f.applied["ns/other"]; ok {
		t.Error("a buffer of another strategy got a condition")
	}

	// The next loop says the same: nothing is written.
	clear(f.applied)
	in.ProcessPods(context.Background(), &processors.Loop{Now: now.Add(time.Minute)}, nil)
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{})
	if len(f.applied) != 0 {
		t.Errorf("unchanged conditions written again: %v", f.applied)
	}
}

func TestInjectorRespectsTheInjectionLimit(t *testing.T) {
	f := newFakes()
	f.template("shape", "1")
	a := f.buffer("a", "shape", 4, "")
	b := f.buffer("b", "shape", 4, "")
	in := New(f, f, f, WithInjectionLimit(5))
	got := in.ProcessPods(context.Background(), &processors.Loop{Now: now}, realPods(2))
	if len(got) != 5 {
		t.Fatalf("%d pods, want the limit of 5", len(got))
	}
	in.ScaleUpDone(context.Background(), &processors.Loop{Now: now}, processors.ScaleUpStatus{})
	if c := provisioningOf(a); c.Message != "3 of 4 pods injected: --pod-injection-limit reached" {
		t.Errorf("a: %q", c.Message)
	}
	if c := provisioningOf(b); c.Message != "0 of 4 pods injected: --pod-injection-limit reached" {
		t.Errorf("b: %q", c.Message)
	}
}

func TestInjectorListErrorInjectsNothing(t *testing.T) {
	f := newFakes()
	f.listErr = errors.New("cache not synced")
	in := New(f, f, f)
	if got := in.ProcessPods(context.Background(), &processors.Loop{Now: now}, realPods(1)); len(got) != 1 {
		t.Errorf("%d pods", len(got))
	}
	in.ScaleUpDone(context.Background(), &processors.Loop{Now: now}, processors.ScaleUpStatus{})
}

func TestInjectorEventsOnBuffers(t *testing.T) {
	f := newFakes()
	f.template("shape", "1")
	f.buffer("spare", "shape", 2, "")
	rec := record.NewFakeRecorder(10)
	in := New(f, f, f, WithEventRecorder(rec))
	loop := &processors.Loop{Now: now}
	pods := in.ProcessPods(context.Background(), loop, realPods(1))
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{Result: scaleup.Result{Increases: []scaleup.Increase{
		{NodeGroup: "a", From: 1, To: 2, Max: 5, Pods: pods, Decision: 1},
		{NodeGroup: "b", From: 0, To: 1, Max: 5, Pods: pods, Decision: 1}}}})
	if got := <-rec.Events; got != "Normal TriggeredScaleUp capacity buffer 2 fake pods triggered scale-up: [{a 1->2 (max: 5)} {b 0->1 (max: 5)}]" {
		t.Errorf("event %q", got)
	}
	pods = in.ProcessPods(context.Background(), loop, nil)
	in.ScaleUpDone(context.Background(), loop, processors.ScaleUpStatus{Result: scaleup.Result{Remaining: map[*apiv1.Pod]string{
		pods[0]: "1 max node group size reached", pods[1]: "1 max node group size reached"}}})
	if got := <-rec.Events; got != "Normal NotTriggerScaleUp capacity buffer 2 fake pods didn't trigger scale-up: 1 max node group size reached" {
		t.Errorf("event %q", got)
	}
	if len(rec.Events) != 0 {
		t.Errorf("more events: %q", <-rec.Events)
	}
}

func TestScaleUpEventsSkipFakePods(t *testing.T) {
	f := newFakes()
	f.template("shape", "1")
	f.buffer("spare", "shape", 1, "")
	pods := New(f, f, f).ProcessPods(context.Background(), &processors.Loop{Now: now}, realPods(1))
	rec := record.NewFakeRecorder(10)
	processors.ScaleUpEvents{Recorder: rec}.ScaleUpDone(context.Background(), nil, processors.ScaleUpStatus{
		Result: scaleup.Result{Remaining: map[*apiv1.Pod]string{pods[0]: "no group", pods[1]: "no group"}}})
	if len(rec.Events) != 1 || !strings.Contains(<-rec.Events, "NotTriggerScaleUp") {
		t.Errorf("want one event, for the real pod")
	}
}
