package controller

import (
	"context"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"k8s.io/autoscaler/cluster-autoscaler/capacitybuffer"
)

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// templateOfPod is the pod template of a running pod of a scalableRef's
// object, read through the API: the pod's informer copy is trimmed
// (container security contexts, commands, environment and mounts are
// dropped from the cache), so it is used only to pick the pod. The template
// is its controller's spec.template (a ReplicaSet's, StatefulSet's, Job's,
// ... as the API server stores it); when the pod has no controller, or one
// without spec.template, the pod as the API server returns it. When the
// controller cannot be read, the pod as the API server returns it too, and
// note says why, for the buffer's condition and an event.
func (s *ScaleClient) templateOfPod(ctx context.Context, cached *apiv1.Pod) (t apiv1.PodTemplateSpec, note string, err error) {
	if owner := metav1.GetControllerOf(cached); owner != nil {
		t, found, err := s.ownerTemplate(ctx, cached.Namespace, owner)
		switch {
		case err != nil:
			note = fmt.Sprintf("the controller %s %q of pod %q could not be read (%v); the template is the pod's own spec",
				owner.Kind, owner.Name, cached.Name, err)
		case found:
			return t, "", nil
		}
	}
	u, err := s.dyn.Resource(podsResource).Namespace(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return apiv1.PodTemplateSpec{}, "", &capacitybuffer.Problem{Reason: capacitybuffer.ReasonScalableRefUnsupported,
			Message: fmt.Sprintf("pod %q, whose template the buffer takes, could not be read: %v", cached.Name, err)}
	}
	if err != nil {
		return apiv1.PodTemplateSpec{}, "", fmt.Errorf("reading pod %s/%s: %w", cached.Namespace, cached.Name, err)
	}
	var pod apiv1.Pod
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
		return apiv1.PodTemplateSpec{}, "", fmt.Errorf("decoding pod %s/%s: %w", cached.Namespace, cached.Name, err)
	}
	return capacitybuffer.TemplateFromPod(&pod), note, nil
}

// ownerTemplate reads the spec.template of the pod's controller, checking
// it is the same object (UID). found is false when the controller has no
// pod template; an error means it could not be read.
func (s *ScaleClient) ownerTemplate(ctx context.Context, namespace string, owner *metav1.OwnerReference) (apiv1.PodTemplateSpec, bool, error) {
	gv, err := schema.ParseGroupVersion(owner.APIVersion)
	if err != nil {
		return apiv1.PodTemplateSpec{}, false, fmt.Errorf("apiVersion %q: %w", owner.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: owner.Kind}
	mapping, err := s.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		s.mapper.Reset()
		mapping, err = s.mapper.RESTMapping(gk, gv.Version)
	}
	if err != nil {
		return apiv1.PodTemplateSpec{}, false, err
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return apiv1.PodTemplateSpec{}, false, nil
	}
	obj, err := s.dyn.Resource(mapping.Resource).Namespace(namespace).Get(ctx, owner.Name, metav1.GetOptions{})
	if err != nil {
		return apiv1.PodTemplateSpec{}, false, err
	}
	if obj.GetUID() != owner.UID {
		return apiv1.PodTemplateSpec{}, false, fmt.Errorf("%s %q is another object now (uid %s, the pod's owner was %s)",
			owner.Kind, owner.Name, obj.GetUID(), owner.UID)
	}
	raw, ok, _ := unstructured.NestedMap(obj.Object, "spec", "template")
	if !ok {
		return apiv1.PodTemplateSpec{}, false, nil
	}
	var t apiv1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &t); err != nil {
		return apiv1.PodTemplateSpec{}, false, fmt.Errorf("its spec.template is not a pod template: %w", err)
	}
	return t, true, nil
}
