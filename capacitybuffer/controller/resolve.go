package controller

import (
	"context"
	"fmt"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// Mapper maps a kind to its resource; a discovery-backed RESTMapper, which
// Reset refreshes (a kind served since the last discovery).
type Mapper interface {
	RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
	Reset()
}

// ScaleClient resolves scalableRefs through the API: the scale subresource
// for the replica count, the object's spec.template for the pod shape, or,
// for a kind without one, the template of the newest pod its scale selector
// matches (that pod's controller's, read through the API; see
// templateOfPod).
type ScaleClient struct {
	dyn    dynamic.Interface
	mapper Mapper
	pods   corelisters.PodLister
}

// NewScaleClient builds a ScaleClient.
func NewScaleClient(dyn dynamic.Interface, mapper Mapper, pods corelisters.PodLister) *ScaleClient {
	return &ScaleClient{dyn: dyn, mapper: mapper, pods: pods}
}

// Resolve implements Scalables.
func (s *ScaleClient) Resolve(ctx context.Context, namespace string, ref v1.ScalableRef) (Target, error) {
	what := fmt.Sprintf("%s %q", groupKind(ref), ref.Name)
	gk := schema.GroupKind{Group: ref.APIGroup, Kind: ref.Kind}
	mapping, err := s.mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		s.mapper.Reset() // perhaps a kind served since the last discovery
		mapping, err = s.mapper.RESTMapping(gk)
	}
	if meta.IsNoMatchError(err) {
		return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefNotFound,
			Message: fmt.Sprintf("the API server serves no kind %s", groupKind(ref))}
	}
	if err != nil {
		return Target{}, fmt.Errorf("mapping %s: %w", groupKind(ref), err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefUnsupported,
			Message: fmt.Sprintf("%s is not namespaced", groupKind(ref))}
	}
	objects := s.dyn.Resource(mapping.Resource).Namespace(namespace)
	obj, err := objects.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefNotFound,
			Message: fmt.Sprintf("%s not found in namespace %q", what, namespace)}
	}
	if err != nil {
		return Target{}, fmt.Errorf("reading %s: %w", what, err)
	}
	scale, err := objects.Get(ctx, ref.Name, metav1.GetOptions{}, "scale")
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefUnsupported,
			Message: fmt.Sprintf("%s has no scale subresource", what)}
	}
	if err != nil {
		return Target{}, fmt.Errorf("reading the scale of %s: %w", what, err)
	}
	replicas, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	target := Target{Replicas: int32(max(min(replicas, 1<<31-1), 0))}
	if raw, ok, _ := unstructured.NestedMap(obj.Object, "spec", "template"); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &target.Template); err != nil {
			return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefUnsupported,
				Message: fmt.Sprintf("spec.template of %s is not a pod template: %v", what, err)}
		}
		return target, nil
	}
	selector, _, _ := unstructured.NestedString(scale.Object, "status", "selector")
	pod, err := s.newestPod(namespace, selector)
	if err != nil || pod == nil {
		why := "no pod matches its scale selector"
		if err != nil {
			why = err.Error()
		}
		return Target{}, &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefUnsupported,
			Message: fmt.Sprintf("%s has no spec.template to copy, and %s", what, why)}
	}
	if target.Template, target.Note, err = s.templateOfPod(ctx, pod); err != nil {
		return Target{}, err
	}
	return target, nil
}

// newestPod returns the newest live pod of namespace that selector (a
// scale's status.selector) matches, or nil.
func (s *ScaleClient) newestPod(namespace, selector string) (*apiv1.Pod, error) {
	if selector == "" {
		return nil, fmt.Errorf("its scale has no selector")
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("its scale selector %q does not parse: %w", selector, err)
	}
	pods, err := s.pods.Pods(namespace).List(sel)
	if err != nil {
		return nil, err
	}
	pods = slices.DeleteFunc(pods, func(p *apiv1.Pod) bool {
		return p.DeletionTimestamp != nil || p.Status.Phase == apiv1.PodSucceeded || p.Status.Phase == apiv1.PodFailed
	})
	if len(pods) == 0 {
		return nil, nil
	}
	return slices.MaxFunc(pods, func(a, b *apiv1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) }), nil
}

func groupKind(ref v1.ScalableRef) string {
	if ref.APIGroup == "" {
		return ref.Kind
	}
	return ref.Kind + "." + ref.APIGroup
}

// DryRunPods resolves a buffer's pod by creating it with dryRun=All: the
// API server defaults it and runs admission (LimitRanges, priority classes,
// mutating and validating webhooks), and stores nothing. It needs the
// permission to create pods in the buffer's namespace.
type DryRunPods struct {
	client kubernetes.Interface
}

// NewDryRunPods builds a DryRunPods.
func NewDryRunPods(client kubernetes.Interface) *DryRunPods { return &DryRunPods{client: client} }

// Resolve implements PodResolver.
func (d *DryRunPods) Resolve(ctx context.Context, namespace string, t *apiv1.PodTemplateSpec) (*apiv1.Pod, error) {
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "capacity-buffer-dry-run-", Namespace: namespace,
		Labels: t.Labels, Annotations: t.Annotations}, Spec: *t.Spec.DeepCopy()}
	pod.Spec.NodeName = ""
	return d.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}
