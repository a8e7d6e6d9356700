package processor

import (
	"fmt"
	"strings"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// TemplateGetter reads PodTemplates; the informer's lister implements it.
type TemplateGetter interface {
	Get(namespace, name string) (*apiv1.PodTemplate, error)
}

// builtPods are a request's pods as an earlier loop built them, and what
// they were built from.
type builtPods struct {
	from string
	sets [][]*apiv1.Pod
}

// podsOf returns the pods the request asks for, PodSet by PodSet, and the
// names of referenced templates that do not exist. The pods built in an
// earlier loop are reused as long as neither the request nor its templates
// changed: a provisioned request is booked every loop, and building its
// pods costs what their number costs.
func podsOf(pr *v1.ProvisioningRequest, class string, templates TemplateGetter, st *requestState) ([][]*apiv1.Pod, []string) {
	tmpls := make([]*apiv1.PodTemplate, len(pr.Spec.PodSets))
	var missing []string
	var from strings.Builder
	fmt.Fprintf(&from, "%s/%d/%s/%s", pr.UID, pr.Generation, pr.Name, class)
	for i, ps := range pr.Spec.PodSets {
		tmpl, err := templates.Get(pr.Namespace, ps.PodTemplateRef.Name)
		if err != nil || tmpl == nil {
			missing = append(missing, ps.PodTemplateRef.Name)
			continue
		}
		tmpls[i] = tmpl
		fmt.Fprintf(&from, "|%s/%s/%s/%d", ps.PodTemplateRef.Name, tmpl.UID, tmpl.ResourceVersion, ps.Count)
	}
	if len(missing) > 0 {
		st.built = nil
		return nil, missing
	}
	if b := st.built; b != nil && b.from == from.String() {
		return b.sets, nil
	}
	sets := buildPods(pr, class, tmpls)
	st.built = &builtPods{from: from.String(), sets: sets}
	return sets, nil
}

// buildPods returns the pods the request asks for, PodSet by PodSet, from
// the PodSets' templates. The pods of one PodSet share their spec and owner
// (the request), so they form one equivalence group; they carry the consume
// and class annotations, as the pods of the workload will.
func buildPods(pr *v1.ProvisioningRequest, class string, tmpls []*apiv1.PodTemplate) [][]*apiv1.Pod {
	var sets [][]*apiv1.Pod
	yes := true
	owner := metav1.OwnerReference{APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Name: pr.Name,
		UID: pr.UID, Controller: &yes}
	for i, ps := range pr.Spec.PodSets {
		tmpl := tmpls[i]
		annotations := map[string]string{}
		for k, v := range tmpl.Template.Annotations {
			annotations[k] = v
		}
		annotations[provreq.ConsumeAnnotation] = pr.Name
		annotations[provreq.ClassAnnotation] = class
		pods := make([]*apiv1.Pod, 0, max(ps.Count, 0))
		for j := 0; j < int(ps.Count); j++ {
			name := fmt.Sprintf("%s-%d-%d", pr.Name, i, j)
			pods = append(pods, &apiv1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: pr.Namespace, Name: name,
					UID:               types.UID(fmt.Sprintf("%s/%s", pr.UID, name)),
					Labels:            tmpl.Template.Labels,
					Annotations:       annotations,
					OwnerReferences:   []metav1.OwnerReference{owner},
					CreationTimestamp: pr.CreationTimestamp},
				Spec:   tmpl.Template.Spec, // shared, read-only: the simulation never writes a pending pod's spec
				Status: apiv1.PodStatus{Phase: apiv1.PodPending},
			})
		}
		if len(pods) > 0 {
			sets = append(sets, pods)
		}
	}
	return sets
}

// flatten is the pods of sets in one list, in order.
func flatten(sets [][]*apiv1.Pod) []*apiv1.Pod {
	n := 0
	for _, s := range sets {
		n += len(s)
	}
	out := make([]*apiv1.Pod, 0, n)
	for _, s := range sets {
		out = append(out, s...)
	}
	return out
}

// firstPods is the first n pods of sets, still PodSet by PodSet.
func firstPods(sets [][]*apiv1.Pod, n int) [][]*apiv1.Pod {
	var out [][]*apiv1.Pod
	for _, s := range sets {
		if n <= 0 {
			break
		}
		k := min(n, len(s))
		out = append(out, s[:k])
		n -= k
	}
	return out
}
