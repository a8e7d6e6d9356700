package controller

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// resetMapper is a fixed RESTMapper with the Mapper's Reset.
type resetMapper struct{ *meta.DefaultRESTMapper }

func (resetMapper) Reset() {}

var (
	widgets     = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	replicaSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

func testMapper() resetMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "example.com", Version: "v1"}, appsv1.SchemeGroupVersion,
		apiv1.SchemeGroupVersion})
	m.Add(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, meta.RESTScopeNamespace)
	m.Add(appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), meta.RESTScopeNamespace)
	m.Add(apiv1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	return resetMapper{m}
}

// restrictedTemplate is a pod template that the restricted Pod Security
// level admits: what the informer cache drops from its pods (container
// security contexts, commands) included.
func restrictedTemplate() apiv1.PodTemplateSpec {
	return apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "secure"}},
		Spec: apiv1.PodSpec{
			SecurityContext: &apiv1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &apiv1.SeccompProfile{Type: apiv1.SeccompProfileTypeRuntimeDefault}},
			Containers: []apiv1.Container{{Name: "main", Image: "secure", Command: []string{"/serve"},
				SecurityContext: &apiv1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsUser: ptr.To[int64](1000),
					Capabilities: &apiv1.Capabilities{Drop: []apiv1.Capability{"ALL"}}}}},
		}}
}

func toUnstructured(t *testing.T, gvk schema.GroupVersionKind, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u
}

// TestPodsTemplateIsItsControllers: a scalableRef's object without
// spec.template (a Widget) takes the template of the newest pod its scale
// selector matches: the pod's controller's (a ReplicaSet, read through the
// API), whose security contexts survive, not the informer's trimmed copy;
// when the controller cannot be read, the pod as the API server returns it,
// with a note; a pod that cannot be read is the buffer's problem.
func TestPodsTemplateIsItsControllers(t *testing.T) {
	tmpl := restrictedTemplate()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "secure-1", Namespace: ns, UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Template: tmpl}}
	full := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "secure-1-a", Namespace: ns, Labels: tmpl.Labels,
		CreationTimestamp: metav1.Unix(100, 0),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "secure-1",
			UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec: *tmpl.Spec.DeepCopy()}
	full.Spec.NodeName = "n1"
	full.Spec.Volumes = []apiv1.Volume{{Name: "kube-api-access-x1"}}
	// The informer's copy: container security context and command dropped.
	cached := full.DeepCopy()
	cached.Spec.Containers[0].SecurityContext, cached.Spec.Containers[0].Command = nil, nil
	widget := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": ns},
		"spec":     map[string]any{"replicas": int64(3)}, "status": map[string]any{"selector": "app=secure"}}}
	fromPod := capacitybuffer.TemplateFromPod(full)

	tests := []struct {
		name      string
		objs      []runtime.Object
		owner     types.UID // the pod's owner reference's UID
		want      apiv1.PodTemplateSpec
		wantNote  string
		wantIssue string
	}{
		{name: "the controller's template", objs: []runtime.Object{rs}, owner: "rs-uid", want: tmpl},
		{name: "controller gone: the pod read through the API", owner: "rs-uid", want: fromPod,
			wantNote: `the controller ReplicaSet "secure-1" of pod "secure-1-a" could not be read`},
		{name: "controller recreated: the pod read through the API", objs: []runtime.Object{rs}, owner: "old-uid",
			want: fromPod, wantNote: "is another object now"},
		{name: "pod and controller gone", owner: "rs-uid", wantIssue: capacitybuffer.ReasonScalableRefUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := full.DeepCopy()
			pod.OwnerReferences[0].UID = tc.owner
			objs := []runtime.Object{widget}
			for _, o := range tc.objs {
				objs = append(objs, toUnstructured(t, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), o))
			}
			if tc.wantIssue == "" {
				objs = append(objs, toUnstructured(t, apiv1.SchemeGroupVersion.WithKind("Pod"), pod))
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				widgets: "WidgetList", replicaSets: "ReplicaSetList", podsResource: "PodList"}, objs...)
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			c := cached.DeepCopy()
			c.OwnerReferences[0].UID = tc.owner
			if err := indexer.Add(c); err != nil {
				t.Fatal(err)
			}
			s := NewScaleClient(dyn, testMapper(), corelisters.NewPodLister(indexer))
			got, err := s.Resolve(context.Background(), ns, v1.ScalableRef{APIGroup: "example.com", Kind: "Widget", Name: "w"})
			if tc.wantIssue != "" {
				if p, ok := errors.AsType[*capacitybuffer.Problem](err); !ok || p.Reason != tc.wantIssue {
					t.Fatalf("Resolve: %v; want a problem %s", err, tc.wantIssue)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Template); diff != "" {
				t.Errorf("template (-want +got):\n%s", diff)
			}
			sc := got.Template.Spec.Containers[0].SecurityContext
			if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || !ptr.Deref(got.Template.Spec.SecurityContext.RunAsNonRoot, false) {
				t.Errorf("security context lost: pod %+v, container %+v", got.Template.Spec.SecurityContext, sc)
			}
			if got.Replicas != 3 {
				t.Errorf("replicas %d, want 3", got.Replicas)
			}
			if (tc.wantNote == "") != (got.Note == "") || !strings.Contains(got.Note, tc.wantNote) {
				t.Errorf("note %q, want one containing %q", got.Note, tc.wantNote)
			}
		})
	}
}

// TestOwnerNotReadIsReported: a Target's note goes into the buffer's
// ReadyForProvisioning message and a PodOwnerNotRead Warning event, once.
func TestOwnerNotReadIsReported(t *testing.T) {
	s := newStore()
	b := s.addBuffer("noted", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{APIGroup: "example.com", Kind: "Widget",
		Name: "w"}, Replicas: ptr.To[int32](1)})
	const note = `the controller ReplicaSet "rs" of pod "p" could not be read (forbidden)`
	rec := record.NewFakeRecorder(100)
	c := New(s, templateStore{s}, scalables{"w": {Replicas: 2, Template: podSpec("1"), Note: note}}, s,
		WithClock(clocktesting.NewFakeClock(start)), WithEventRecorder(rec))
	reconcile(t, c, "noted")
	reconcile(t, c, "noted")
	if cond := ready(t, b); cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, note) {
		t.Errorf("ReadyForProvisioning %+v: want True with the note", cond)
	}
	var warnings []string
	for len(rec.Events) > 0 {
		if ev := <-rec.Events; strings.HasPrefix(ev, "Warning") {
			warnings = append(warnings, ev)
		}
	}
	if diff := cmp.Diff([]string{"Warning " + capacitybuffer.ReasonPodOwnerNotRead + " " + note}, warnings); diff != "" {
		t.Errorf("warning events (-want +got):\n%s", diff)
	}
}
