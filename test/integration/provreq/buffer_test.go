package provreq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
	cbclient "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/client"
	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/controller"
	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/crd"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/customresources"
	"k8s.io/autoscaler/cluster-autoscaler/processors/capacitybuffers"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// bufferEnv is a test namespace with the CapacityBuffer CRD installed and a
// typed client.
type bufferEnv struct {
	*framework.Env
	buffers *cbclient.CapacityBuffers
}

func newBufferEnv(t testing.TB) *bufferEnv {
	e := framework.New(t)
	if err := crd.Install(e.Context(), e.Config); err != nil {
		t.Fatal(err)
	}
	c, err := cbclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	be := &bufferEnv{Env: e, buffers: c.CapacityBuffers(e.Namespace)}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		list, err := be.buffers.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, b := range list.Items {
			t.Logf("buffer %s status: replicas %v template %v", b.Name, b.Status.Replicas, b.Status.PodTemplateRef)
			for _, c := range b.Status.Conditions {
				t.Logf("buffer %s: %s=%s %s: %s", b.Name, c.Type, c.Status, c.Reason, c.Message)
			}
		}
	})
	return be
}

// podTemplate creates a PodTemplate of pods requesting cpu, pinned to pool.
func (e *bufferEnv) podTemplate(name, cpu, pool string) {
	e.T.Helper()
	pt := &apiv1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool},
			Containers: []apiv1.Container{{Name: "main", Image: "fake", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(cpu),
					apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}}}
	if _, err := e.Client.CoreV1().PodTemplates(e.Namespace).Create(e.Context(), pt, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

func (e *bufferEnv) create(name string, spec v1.CapacityBufferSpec) {
	e.T.Helper()
	b := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace}, Spec: spec}
	if _, err := e.buffers.Create(e.Context(), b, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("creating buffer %s: %v", name, err)
	}
}

// condition waits until the buffer has condition typ with status and reason.
func (e *bufferEnv) condition(name, typ string, status metav1.ConditionStatus, reason string, timeout time.Duration) *v1.CapacityBuffer {
	e.T.Helper()
	var got *v1.CapacityBuffer
	e.Eventually(timeout, fmt.Sprintf("buffer %s %s=%s (%s)", name, typ, status, reason), func(ctx context.Context) (bool, error) {
		b, err := e.buffers.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = b
		c := meta.FindStatusCondition(b.Status.Conditions, typ)
		return c != nil && c.Status == status && c.Reason == reason, nil
	})
	return got
}

// bufferEvent waits for an event of reason on the buffer whose message contains text.
func (e *bufferEnv) bufferEvent(name, reason, text string) {
	e.T.Helper()
	e.Eventually(30*time.Second, fmt.Sprintf("event %s on buffer %s mentioning %q", reason, name, text), func(ctx context.Context) (bool, error) {
		events, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Kind == v1.Kind && ev.InvolvedObject.Name == name && ev.Reason == reason &&
				strings.Contains(ev.Message, text) {
				return true, nil
			}
		}
		return false, nil
	})
}

// readyReplicas waits until the buffer's status.readyReplicas is want.
func (e *bufferEnv) readyReplicas(name string, want int32, timeout time.Duration) *v1.CapacityBuffer {
	e.T.Helper()
	var got *v1.CapacityBuffer
	e.Eventually(timeout, fmt.Sprintf("buffer %s readyReplicas %d", name, want), func(ctx context.Context) (bool, error) {
		b, err := e.buffers.Get(ctx, name, metav1.GetOptions{})
		got = b
		return err == nil && b.Status.ReadyReplicas != nil && *b.Status.ReadyReplicas == want, err
	})
	return got
}

// readyReplicasOwners names the field managers of b's status.readyReplicas.
func readyReplicasOwners(b *v1.CapacityBuffer) []string {
	var out []string
	for _, mf := range b.ManagedFields {
		if mf.FieldsV1 != nil && strings.Contains(mf.FieldsV1.GetRawString(), `"f:readyReplicas"`) {
			out = append(out, mf.Manager+"/"+mf.Subresource)
		}
	}
	return out
}

func bufferArgs(e *bufferEnv, path string, extra ...string) []string {
	return itest.ScaleDownArgs(e.Env, path, append([]string{"--capacity-buffer-controller-enabled",
		"--capacity-buffer-pod-injection-enabled"}, extra...)...)
}

// shapedDeployment runs n pods of cpu pinned to pool.
func shapedDeployment(e *framework.Env, name, pool string, n int32, cpu string) {
	e.T.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: apiv1.PodSpec{NodeSelector: map[string]string{"pool": pool}, Containers: []apiv1.Container{{Name: "c",
					Image: "fake", Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
						apiv1.ResourceCPU: resource.MustParse(cpu), apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}}}}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Context(), d, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// unremovable reads the status ConfigMap's unremovable nodes, by node.
func unremovable(e *framework.Env) map[string]string {
	e.T.Helper()
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	var kept []clusterstate.UnremovableNode
	if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.UnremovableDataKey]), &kept); err != nil {
		e.T.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range kept {
		out[u.Name] = u.Reason
	}
	return out
}

// TestCapacityBufferHoldsSpareCapacity: a buffer of two 2-CPU pods makes
// the autoscaler add one 4-CPU node and keep it while it is empty; a
// Deployment of the same shape then runs on that node at once, without a
// scale-up of its own, and the buffer is provisioned again on a new node;
// once the buffer is deleted, its empty node is scaled down. With
// --capacity-buffer-ready-replicas-enabled, status.readyReplicas is 2 once
// the node exists, and 0 for a buffer whose pods fit no node group; its
// field manager is the only one of the field.
func TestCapacityBufferHoldsSpareCapacity(t *testing.T) {
	e := newBufferEnv(t)
	itest.DumpPods(e.Env)
	pool := framework.UniqueName("spare")
	path := itest.GroupsConfig(e.Env, pool)
	e.podTemplate("shape", "2", pool)
	e.create("spare", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](2)})
	e.podTemplate("nowhere", "1", framework.UniqueName("nowhere")) // no group has this pool
	e.create("stuck", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "nowhere"}, Replicas: ptr.To[int32](1)})
	p := itest.StartAutoscaler(t, "autoscaler", bufferArgs(e, path, "--unremovable-node-recheck-timeout=0s",
		"--capacity-buffer-ready-replicas-enabled")...)

	// The controller's dry-run keeps the shape in a template the buffer owns.
	b := e.condition("spare", capacitybuffer.ConditionReadyForProvisioning, metav1.ConditionTrue,
		capacitybuffer.ReasonAttributesSetSuccessfully, 30*time.Second)
	managed := capacitybuffer.ManagedTemplateName("spare")
	if *b.Status.Replicas != 2 || b.Status.PodTemplateRef.Name != managed || *b.Status.ProvisioningStrategy != capacitybuffer.StrategyActiveCapacity {
		t.Errorf("status: replicas %d, template %s, strategy %s", *b.Status.Replicas, b.Status.PodTemplateRef.Name, *b.Status.ProvisioningStrategy)
	}
	pt, err := e.Client.CoreV1().PodTemplates(e.Namespace).Get(e.Context(), managed, metav1.GetOptions{})
	if err != nil || !metav1.IsControlledBy(pt, b) || pt.Template.Spec.SchedulerName != apiv1.DefaultSchedulerName {
		t.Errorf("kept template %v (err %v): want it owned by the buffer and defaulted by the API server", pt, err)
	}
	e.condition("spare", capacitybuffer.ConditionProvisioning, metav1.ConditionTrue, capacitybuffer.ReasonFakePodsInjected, 30*time.Second)
	e.Eventually(30*time.Second, "one node added for the buffer", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e.Env, pool)) == 1, nil
	})
	e.bufferEvent("spare", "TriggeredScaleUp", "capacity buffer 2 fake pods triggered scale-up")
	first := itest.NodeNames(e.Env, pool)[0]
	// Once the node is registered, the loop places both pods on it.
	ready := e.readyReplicas("spare", 2, 30*time.Second)
	stuck := e.readyReplicas("stuck", 0, 30*time.Second)
	for _, b := range []*v1.CapacityBuffer{ready, stuck} {
		if got, want := readyReplicasOwners(b), []string{capacitybuffers.ReadyReplicasFieldManager + "/status"}; !slices.Equal(got, want) {
			t.Errorf("buffer %s: readyReplicas owned by %v, want %v", b.Name, got, want)
		}
	}

	// Empty but held: loops well past --scale-down-unneeded-time keep it.
	time.Sleep(8 * time.Second)
	if n := itest.NodeNames(e.Env, pool); len(n) != 1 {
		t.Fatalf("nodes %v: the buffer's node was removed or another added", n)
	}
	if reason := unremovable(e.Env)[first]; reason != "BookedCapacity" {
		t.Errorf("the status ConfigMap says %s is unremovable for %q, want BookedCapacity", first, reason)
	}
	if gen := pt.Generation; gen != 1 {
		t.Errorf("kept template generation %d after creation, want 1", gen)
	}

	// A workload of the buffer's shape: it runs on the buffer's node at
	// once (the scheduler sees an empty node), and the buffer is provisioned
	// again on a second node.
	shapedDeployment(e.Env, "web", pool, 2, "2")
	e.Eventually(30*time.Second, "the workload Running on the buffer's node", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e.Env, "web")
		return err == nil && running == 2 && nodes[first] == 2, err
	})
	e.Eventually(30*time.Second, "a second node for the buffer", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e.Env, pool)) == 2, nil
	})
	e.readyReplicas("spare", 2, 30*time.Second) // on the second node
	events, err := e.Client.CoreV1().Events(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.InvolvedObject.Kind == "Pod" && (ev.Reason == "TriggeredScaleUp" || ev.Reason == "NotTriggerScaleUp") {
			t.Errorf("event %s on pod %s: the workload should not have waited for a scale-up", ev.Reason, ev.InvolvedObject.Name)
		}
	}
	// The kept template is not rewritten by the resyncs.
	if pt, err := e.Client.CoreV1().PodTemplates(e.Namespace).Get(e.Context(), managed, metav1.GetOptions{}); err != nil || pt.Generation != 1 {
		t.Errorf("kept template: generation %v, err %v; want 1", pt.Generation, err)
	}

	// Without the buffer, its node is an empty node like any other.
	if err := e.buffers.Delete(e.Context(), "spare", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the spare node removed, the workload's kept", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e.Env, "web")
		nodes := itest.NodeNames(e.Env, pool)
		return err == nil && running == 2 && len(nodes) == 1 && nodes[0] == first, err
	})
	_, body, err := p.Get(e.Context(), "/metrics")
	if err != nil || !strings.Contains(body, controller.OldestReconciliationMetric+`{new_buffer="false"}`) {
		t.Errorf("/metrics lacks %s (err %v)", controller.OldestReconciliationMetric, err)
	}
}

// TestCapacityBufferBadInputGetsAReason: buffers that cannot be translated
// get ReadyForProvisioning=False with a reason, and Provisioning=False;
// a percentage buffer of a Deployment and a buffer written as v1alpha1 are
// translated; the autoscaler keeps running and adds no node.
func TestCapacityBufferBadInputGetsAReason(t *testing.T) {
	e := newBufferEnv(t)
	pool := framework.UniqueName("bad")
	path := itest.GroupsConfig(e.Env, pool)
	e.podTemplate("shape", "1", pool)
	nowhere := framework.UniqueName("nowhere") // no group has this pool: pods of it cannot be helped
	shapedDeployment(e.Env, "web", nowhere, 4, "500m")

	e.create("missing-template", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "nope"}, Replicas: ptr.To[int32](1)})
	e.create("no-shape", v1.CapacityBufferSpec{Replicas: ptr.To[int32](1)})
	e.create("unknown-kind", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{APIGroup: "example.com", Kind: "Widget",
		Name: "w"}, Replicas: ptr.To[int32](1)})
	e.create("missing-deployment", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{APIGroup: "apps", Kind: "Deployment",
		Name: "gone"}, Percentage: ptr.To[int32](10)})
	e.create("gpu-limits", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"},
		Limits: apiv1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}})
	e.create("web-spare", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{APIGroup: "apps", Kind: "Deployment",
		Name: "web"}, Percentage: ptr.To[int32](50)})
	// The schema refuses what it can: both references, negative replicas.
	for name, spec := range map[string]v1.CapacityBufferSpec{
		"both": {PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](1),
			ScalableRef: &v1.ScalableRef{APIGroup: "apps", Kind: "Deployment", Name: "web"}},
		"negative": {PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](-1)},
	} {
		b := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace}, Spec: spec}
		if _, err := e.buffers.Create(e.Context(), b, metav1.CreateOptions{}); err == nil {
			t.Errorf("buffer %s was accepted by the API server", name)
		}
	}
	// Written as v1alpha1, as for upstream's 1.34.
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	alpha := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "autoscaling.x-k8s.io/v1alpha1",
		"kind": "CapacityBuffer", "metadata": map[string]any{"name": "alpha"},
		"spec": map[string]any{"podTemplateRef": map[string]any{"name": "shape"}, "replicas": int64(0)}}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "autoscaling.x-k8s.io", Version: "v1alpha1",
		Resource: "capacitybuffers"}).Namespace(e.Namespace).Create(e.Context(), alpha, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a v1alpha1 buffer: %v", err)
	}

	p := itest.StartAutoscaler(t, "autoscaler", bufferArgs(e, path, "--capacity-buffer-pod-dry-run-enabled=false")...)
	for name, reason := range map[string]string{
		"missing-template":   capacitybuffer.ReasonPodTemplateNotFound,
		"no-shape":           capacitybuffer.ReasonInvalidSpec,
		"unknown-kind":       capacitybuffer.ReasonScalableRefNotFound,
		"missing-deployment": capacitybuffer.ReasonScalableRefNotFound,
		"gpu-limits":         capacitybuffer.ReasonInvalidSpec,
	} {
		e.condition(name, capacitybuffer.ConditionReadyForProvisioning, metav1.ConditionFalse, reason, 30*time.Second)
		e.condition(name, capacitybuffer.ConditionProvisioning, metav1.ConditionFalse, capacitybuffer.ReasonNotReadyForProvisioning, 30*time.Second)
	}
	e.bufferEvent("missing-template", capacitybuffer.ReasonPodTemplateNotFound, `PodTemplate "nope" not found`)

	// 50% of four replicas; the shape is the Deployment's, kept in a
	// template the buffer owns (no dry-run here).
	web := e.condition("web-spare", capacitybuffer.ConditionReadyForProvisioning, metav1.ConditionTrue,
		capacitybuffer.ReasonAttributesSetSuccessfully, 30*time.Second)
	if *web.Status.Replicas != 2 || web.Status.PodTemplateRef.Name != capacitybuffer.ManagedTemplateName("web-spare") {
		t.Errorf("web-spare: replicas %d, template %s", *web.Status.Replicas, web.Status.PodTemplateRef.Name)
	}
	// Its pods fit no group: the buffer is told why.
	e.bufferEvent("web-spare", "NotTriggerScaleUp", "capacity buffer 2 fake pods didn't trigger scale-up")
	// The Deployment grows: the buffer follows.
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Patch(e.Context(), "web", "application/merge-patch+json",
		[]byte(`{"spec":{"replicas":10}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "web-spare follows its Deployment to 5 chunks", func(ctx context.Context) (bool, error) {
		b, err := e.buffers.Get(ctx, "web-spare", metav1.GetOptions{})
		return err == nil && b.Status.Replicas != nil && *b.Status.Replicas == 5, err
	})

	e.condition("alpha", capacitybuffer.ConditionReadyForProvisioning, metav1.ConditionTrue,
		capacitybuffer.ReasonAttributesSetSuccessfully, 30*time.Second)
	e.condition("alpha", capacitybuffer.ConditionProvisioning, metav1.ConditionFalse, capacitybuffer.ReasonBufferIsEmpty, 30*time.Second)

	if code, _, err := p.Get(e.Context(), "/health-check"); err != nil || code != 200 {
		t.Errorf("/health-check: %d %v", code, err)
	}
	// Without --capacity-buffer-ready-replicas-enabled, no loop wrote
	// readyReplicas, though every loop since the first looked at these
	// buffers (with it, each would have 0).
	all, err := e.buffers.List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range all.Items {
		if b.Status.ReadyReplicas != nil {
			t.Errorf("buffer %s: readyReplicas %d written with the flag off", b.Name, *b.Status.ReadyReplicas)
		}
	}
	if n := itest.NodeNames(e.Env, pool); len(n) != 0 {
		t.Errorf("nodes %v added for buffers that cannot be provisioned", n)
	}
	select {
	case <-p.Done:
		t.Fatalf("the autoscaler exited: %v", p.ExitErr)
	default:
	}
}

// TestCapacityBuffersFitResourceQuotas: two buffers share their namespace's
// ResourceQuota, the older first; a pod that comes into the quota shrinks
// the newer buffer (the quota controller's used is what counts).
func TestCapacityBuffersFitResourceQuotas(t *testing.T) {
	e := newBufferEnv(t)
	pool := framework.UniqueName("quota")
	path := itest.GroupsConfig(e.Env, pool)
	e.podTemplate("shape", "1", pool)
	cpu := apiv1.ResourceList{"requests.cpu": resource.MustParse("3")}
	if _, err := e.Client.CoreV1().ResourceQuotas(e.Namespace).Create(e.Context(), &apiv1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "team-cpu"}, Spec: apiv1.ResourceQuotaSpec{Hard: cpu}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create("older", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](2)})
	time.Sleep(1100 * time.Millisecond) // creation times are in seconds
	e.create("newer", v1.CapacityBufferSpec{PodTemplateRef: &v1.LocalObjectRef{Name: "shape"}, Replicas: ptr.To[int32](2)})
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e.Env, path, "--capacity-buffer-controller-enabled")...)

	older := e.condition("older", capacitybuffer.ConditionLimitedByQuotas, metav1.ConditionFalse, capacitybuffer.ReasonResourceQuotasAllocated, 30*time.Second)
	newer := e.condition("newer", capacitybuffer.ConditionLimitedByQuotas, metav1.ConditionTrue, capacitybuffer.ReasonResourceQuotasAllocated, 30*time.Second)
	if *older.Status.Replicas != 2 || *newer.Status.Replicas != 1 {
		t.Errorf("replicas: older %d, newer %d; want 2 and the 1 left of 3 CPUs", *older.Status.Replicas, *newer.Status.Replicas)
	}
	if msg := meta.FindStatusCondition(newer.Status.Conditions, capacitybuffer.ConditionLimitedByQuotas).Message; msg != "2 chunks limited to 1 by ResourceQuota team-cpu (requests.cpu)" {
		t.Errorf("message %q", msg)
	}
	// A pod (pending: no node of its pool) counts against the quota.
	itest.CreatePods(e.Env, "worker", 1, "1", map[string]string{"pool": pool})
	e.Eventually(30*time.Second, "the newer buffer shrinks to 0", func(ctx context.Context) (bool, error) {
		b, err := e.buffers.Get(ctx, "newer", metav1.GetOptions{})
		return err == nil && b.Status.Replicas != nil && *b.Status.Replicas == 0, err
	})
}

// widgetCRD is a kind with a scale subresource and no pod template, whose
// pods some other controller runs: a buffer of it takes the template of
// its newest pod.
const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.buffertest.example.com
spec:
  group: buffertest.example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
`

// TestCapacityBufferOfPodsKeepsTheirSecurityContext: in a namespace that
// enforces the restricted Pod Security level, a buffer of a Widget (no
// spec.template; its pods are a ReplicaSet's) is translated with the server
// dry-run on: its template is the ReplicaSet's, whose security contexts the
// informer's trimmed copy of the pod lacks, so the dry-run is admitted.
func TestCapacityBufferOfPodsKeepsTheirSecurityContext(t *testing.T) {
	e := newBufferEnv(t)
	if err := customresources.Install(e.Context(), e.Config, []byte(widgetCRD)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CoreV1().Namespaces().Patch(e.Context(), e.Namespace, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := framework.UniqueName("secure")
	path := itest.GroupsConfig(e.Env, pool)
	nowhere := framework.UniqueName("nowhere") // its pods stay pending: no group has this pool
	labels := map[string]string{"app": "secure"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "secure", Namespace: e.Namespace},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: apiv1.PodSpec{
				NodeSelector: map[string]string{"pool": nowhere},
				SecurityContext: &apiv1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
					SeccompProfile: &apiv1.SeccompProfile{Type: apiv1.SeccompProfileTypeRuntimeDefault}},
				Containers: []apiv1.Container{{Name: "main", Image: "fake", Command: []string{"/serve"},
					SecurityContext: &apiv1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
						Capabilities: &apiv1.Capabilities{Drop: []apiv1.Capability{"ALL"}}},
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{
						apiv1.ResourceCPU: resource.MustParse("500m"), apiv1.ResourceMemory: resource.MustParse("100Mi")}}}}}}}}
	if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Create(e.Context(), rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the ReplicaSet's pod created", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=secure"})
		return err == nil && len(pods.Items) == 1, err
	})
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "buffertest.example.com", Version: "v1", Resource: "widgets"}).
		Namespace(e.Namespace)
	w, err := widgets.Create(e.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "buffertest.example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w"},
		"spec": map[string]any{"replicas": int64(1)}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Object["status"] = map[string]any{"replicas": int64(1), "selector": "app=secure"}
	if _, err := widgets.UpdateStatus(e.Context(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create("secure-spare", v1.CapacityBufferSpec{ScalableRef: &v1.ScalableRef{APIGroup: "buffertest.example.com",
		Kind: "Widget", Name: "w"}, Replicas: ptr.To[int32](2)})

	itest.StartAutoscaler(t, "autoscaler", bufferArgs(e, path)...)
	b := e.condition("secure-spare", capacitybuffer.ConditionReadyForProvisioning, metav1.ConditionTrue,
		capacitybuffer.ReasonAttributesSetSuccessfully, 60*time.Second)
	pt, err := e.Client.CoreV1().PodTemplates(e.Namespace).Get(e.Context(), b.Status.PodTemplateRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := pt.Template.Spec.Containers[0]
	if c.SecurityContext == nil || ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true) ||
		c.SecurityContext.Capabilities == nil || len(c.SecurityContext.Capabilities.Drop) != 1 || len(c.Command) != 1 {
		t.Errorf("kept template's container %+v: want the ReplicaSet's security context and command", c)
	}
	if *b.Status.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *b.Status.Replicas)
	}
}
