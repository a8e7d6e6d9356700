package whatif

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
)

const manifests = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 4
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: x}]
---
apiVersion: v1
kind: Pod
metadata: {name: bare, namespace: shop}
spec:
  containers: [{name: c, image: x}]
`

func TestRead(t *testing.T) {
	created := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	objects, err := Read(strings.NewReader(manifests), created)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Kind, Namespace, Name string
		Pods                  []string
	}
	var got []summary
	for _, o := range objects {
		s := summary{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
		for _, p := range o.Pods {
			s.Pods = append(s.Pods, p.Namespace+"/"+p.Name)
			if p.Spec.SchedulerName != apiv1.DefaultSchedulerName || p.Status.Conditions[0].Reason != apiv1.PodReasonUnschedulable ||
				!p.CreationTimestamp.Time.Equal(created) || p.UID == "" {
				t.Errorf("pod %s/%s is not a pending, unschedulable pod created at %v: %+v", p.Namespace, p.Name, created, p)
			}
		}
		got = append(got, s)
	}
	want := []summary{
		{"Deployment", "shop", "web", []string{"shop/web-whatif-0", "shop/web-whatif-1", "shop/web-whatif-2"}},
		{"Job", "default", "train", []string{"default/train-whatif-0", "default/train-whatif-1"}},
		{"StatefulSet", "shop", "db", []string{"shop/db-whatif-0"}},
		{"Pod", "shop", "bare", []string{"shop/bare"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if a, b := objects[0].Pods[0].OwnerReferences[0].UID, objects[0].Pods[2].OwnerReferences[0].UID; a != b || a == "" {
		t.Errorf("a Deployment's pods have owners %q and %q, want one", a, b)
	}
}

func TestReadProvisioningRequest(t *testing.T) {
	created := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	objects, err := Read(strings.NewReader(`apiVersion: v1
kind: PodTemplate
metadata: {name: ppt}
template:
  spec:
    containers: [{name: c, image: x}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train, namespace: ml}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: ppt}, count: 3}]
status:
  conditions: [{type: Provisioned, status: "True", reason: X, lastTransitionTime: "2026-01-01T00:00:00Z", message: ""}]
`), created)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) != 2 || objects[0].Template == nil || objects[0].Namespace != "default" || objects[1].Request == nil {
		t.Fatalf("objects %+v, want the template in default and the request", objects)
	}
	pr := objects[1].Request
	if pr.Namespace != "ml" || pr.UID == "" || !pr.CreationTimestamp.Time.Equal(created) || len(pr.Status.Conditions) != 0 ||
		pr.Spec.PodSets[0].Count != 3 || len(objects[1].Pods) != 0 {
		t.Errorf("request %+v, want a new request (no status) of 3 pods in ml created at %v", pr, created)
	}
}

func TestReadRejectsBadInput(t *testing.T) {
	for name, in := range map[string]string{
		"empty":       "",
		"other kind":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
		"not yaml":    "{{{",
		"unknown api": "apiVersion: nope/v1\nkind: Thing\n",
	} {
		if _, err := Read(strings.NewReader(in), time.Now()); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
