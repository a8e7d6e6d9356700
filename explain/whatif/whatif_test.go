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
