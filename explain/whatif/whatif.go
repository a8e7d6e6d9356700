package whatif

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	provreqv1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// MaxPods bounds the pods one manifest file may make.
const MaxPods = 100000

// Object is one manifest object and the pods it would make; a
// ProvisioningRequest or a PodTemplate makes none itself (the loop makes a
// request's pods from its templates).
type Object struct {
	Kind, Namespace, Name string
	Pods                  []*apiv1.Pod
	Request               *provreqv1.ProvisioningRequest
	Template              *apiv1.PodTemplate
}

// decoder knows the Kubernetes API types and ProvisioningRequests.
func decoder() (runtime.Decoder, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := provreqv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer(), nil
}

// Read decodes every document of r and makes each object's pods, pending
// and marked unschedulable as the scheduler would mark them, created at
// created (old enough for --new-pod-scale-up-delay is the caller's
// choice). Documents of other kinds are an error, as is an empty input.
func Read(r io.Reader, created time.Time) ([]Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	dec, err := decoder()
	if err != nil {
		return nil, fmt.Errorf("building the manifest decoder: %w", err)
	}
	decode := dec.Decode
	var out []Object
	total := 0
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", i, err)
		}
		if len(trimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding document %d: %w", i, err)
		}
		o, err := objectOf(obj, created)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if total += len(o.Pods); total > MaxPods {
			return nil, fmt.Errorf("document %d: more than %d pods in all", i, MaxPods)
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil, errors.New("no object in the manifests")
	}
	return out, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\n' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

// objectOf makes the pods of one decoded object.
func objectOf(obj any, created time.Time) (Object, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return controlled("Deployment", o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), created), nil
	case *appsv1.ReplicaSet:
		return controlled("ReplicaSet", o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), created), nil
	case *appsv1.StatefulSet:
		return controlled("StatefulSet", o.ObjectMeta, o.Spec.Template, replicas(o.Spec.Replicas), created), nil
	case *batchv1.Job:
		n := replicas(o.Spec.Parallelism)
		if o.Spec.Completions != nil && int(*o.Spec.Completions) < n {
			n = int(*o.Spec.Completions)
		}
		return controlled("Job", o.ObjectMeta, o.Spec.Template, n, created), nil
	case *apiv1.Pod:
		p := pending(o.ObjectMeta, o.Spec, created)
		p.Name = o.Name
		return Object{Kind: "Pod", Namespace: p.Namespace, Name: o.Name, Pods: []*apiv1.Pod{p}}, nil
	case *apiv1.PodTemplate:
		t := o.DeepCopy()
		t.Namespace = namespaceOf(o.ObjectMeta)
		t.CreationTimestamp = metav1.NewTime(created)
		return Object{Kind: "PodTemplate", Namespace: t.Namespace, Name: t.Name, Template: t}, nil
	case *provreqv1.ProvisioningRequest:
		pr := o.DeepCopy()
		pr.Namespace = namespaceOf(o.ObjectMeta)
		pr.CreationTimestamp = metav1.NewTime(created)
		pr.Status = provreqv1.ProvisioningRequestStatus{}
		if pr.UID == "" {
			pr.UID = types.UID("whatif-provreq-" + pr.Namespace + "-" + pr.Name)
		}
		return Object{Kind: "ProvisioningRequest", Namespace: pr.Namespace, Name: pr.Name, Request: pr}, nil
	}
	return Object{}, fmt.Errorf("%T is not a Deployment, ReplicaSet, StatefulSet, Job, Pod, ProvisioningRequest or PodTemplate", obj)
}

func replicas(n *int32) int {
	if n == nil {
		return 1
	}
	return max(0, int(*n))
}

// controlled makes n pods of template, owned by one controller.
func controlled(kind string, meta metav1.ObjectMeta, template apiv1.PodTemplateSpec, n int, created time.Time) Object {
	ns := namespaceOf(meta)
	o := Object{Kind: kind, Namespace: ns, Name: meta.Name}
	yes := true
	owner := metav1.OwnerReference{APIVersion: "whatif", Kind: kind, Name: meta.Name, Controller: &yes,
		UID: types.UID(fmt.Sprintf("whatif-%s-%s-%s", kind, ns, meta.Name))}
	for i := range n {
		tm := template.ObjectMeta
		tm.Namespace = ns
		p := pending(tm, template.Spec, created)
		p.Name = fmt.Sprintf("%s-whatif-%d", meta.Name, i)
		p.UID = types.UID(fmt.Sprintf("%s-%d", owner.UID, i))
		p.OwnerReferences = []metav1.OwnerReference{owner}
		o.Pods = append(o.Pods, p)
	}
	return o
}

func namespaceOf(meta metav1.ObjectMeta) string {
	if meta.Namespace == "" {
		return "default"
	}
	return meta.Namespace
}

// pending is a pod of spec as the scheduler leaves one it cannot place.
func pending(meta metav1.ObjectMeta, spec apiv1.PodSpec, created time.Time) *apiv1.Pod {
	p := &apiv1.Pod{ObjectMeta: *meta.DeepCopy(), Spec: *spec.DeepCopy()}
	p.Namespace = namespaceOf(meta)
	if p.UID == "" {
		p.UID = types.UID("whatif-pod-" + p.Namespace + "-" + meta.Name)
	}
	p.CreationTimestamp = metav1.NewTime(created)
	if p.Spec.SchedulerName == "" {
		p.Spec.SchedulerName = apiv1.DefaultSchedulerName
	}
	p.Spec.NodeName = ""
	p.Status = apiv1.PodStatus{Phase: apiv1.PodPending, Conditions: []apiv1.PodCondition{{Type: apiv1.PodScheduled,
		Status: apiv1.ConditionFalse, Reason: apiv1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(created)}}}
	return p
}
