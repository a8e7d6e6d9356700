package client_test

import (
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1beta1"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/crd"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }

// setup gives the test a namespace, the CRD installed and a client.
func setup(t *testing.T) (*framework.Env, *client.Client) {
	t.Helper()
	env := framework.New(t)
	if err := crd.Install(env.Context(), env.Config); err != nil {
		t.Fatalf("installing the CRD: %v", err)
	}
	c, err := client.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return env, c
}

// kueueRequest creates what Kueue's provisioning admission check creates for
// a workload: one PodTemplate per PodSet named ppt-<request>-<podset>, created
// first and labelled as Kueue-managed, then the v1 request referencing them,
// then the templates' controller reference moved to the request.
func kueueRequest(t *testing.T, env *framework.Env, c *client.Client, name, class string,
	params map[string]v1.Parameter, counts map[string]int32) *v1.ProvisioningRequest {
	t.Helper()
	ctx := env.Context()
	pr := &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace, Labels: map[string]string{"kueue.x-k8s.io/managed": "true"}},
		Spec:       v1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: params},
	}
	var templates []*apiv1.PodTemplate
	for _, podSet := range slices.Sorted(maps.Keys(counts)) {
		pt := &apiv1.PodTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "ppt-" + name + "-" + podSet, Namespace: env.Namespace, Labels: map[string]string{"kueue.x-k8s.io/managed": "true"}},
			Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("500m")}},
			}}}},
		}
		created, err := env.Client.CoreV1().PodTemplates(env.Namespace).Create(ctx, pt, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating PodTemplate %s: %v", pt.Name, err)
		}
		templates = append(templates, created)
		pr.Spec.PodSets = append(pr.Spec.PodSets, v1.PodSet{PodTemplateRef: v1.Reference{Name: created.Name}, Count: counts[podSet]})
	}
	created, err := c.ProvisioningRequests(env.Namespace).Create(ctx, pr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating ProvisioningRequest %s: %v", name, err)
	}
	for _, pt := range templates {
		pt.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1.SchemeGroupVersion.String(), Kind: v1.Kind, Name: created.Name, UID: created.UID, Controller: ptr.To(true),
		}}
		if _, err := env.Client.CoreV1().PodTemplates(env.Namespace).Update(ctx, pt, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("moving PodTemplate %s under the request: %v", pt.Name, err)
		}
	}
	return created
}

// warnings records the API server's warning headers.
type warnings struct {
	mu   sync.Mutex
	text []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.text = append(w.text, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.text)
}

func TestKueueStyleRequestReadsBackInBothVersions(t *testing.T) {
	env, c := setup(t)
	ctx := env.Context()
	params := map[string]v1.Parameter{provreq.ParamNoRetry: "true", provreq.ParamValidUntilSeconds: "60", "maxRunDurationSeconds": "3600"}
	created := kueueRequest(t, env, c, "job-a-prov-1", provreq.ClassCheckCapacity, params, map[string]int32{"main": 3, "workers": 5})

	got, err := c.ProvisioningRequests(env.Namespace).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := v1.ProvisioningRequestSpec{
		PodSets: []v1.PodSet{
			{PodTemplateRef: v1.Reference{Name: "ppt-job-a-prov-1-main"}, Count: 3},
			{PodTemplateRef: v1.Reference{Name: "ppt-job-a-prov-1-workers"}, Count: 5},
		},
		ProvisioningClassName: provreq.ClassCheckCapacity,
		Parameters:            params,
	}
	if diff := cmp.Diff(wantSpec, got.Spec); diff != "" {
		t.Errorf("v1 spec (-want +got):\n%s", diff)
	}
	if got.Generation != 1 || len(got.Status.Conditions) != 0 {
		t.Errorf("new request: generation %d, conditions %v", got.Generation, got.Status.Conditions)
	}
	for _, ps := range got.Spec.PodSets {
		if _, err := env.Client.CoreV1().PodTemplates(env.Namespace).Get(ctx, ps.PodTemplateRef.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("PodTemplate %s of the request: %v", ps.PodTemplateRef.Name, err)
		}
	}
	list, err := c.ProvisioningRequests(env.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "kueue.x-k8s.io/managed=true"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Name != created.Name {
		t.Errorf("List = %v, %v; want the one request", list, err)
	}

	// The same object through the deprecated version, with the typed v1beta1 struct.
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(v1beta1.SchemeGroupVersion.WithResource(v1beta1.ResourcePlural)).Namespace(env.Namespace).Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the request through v1beta1: %v", err)
	}
	var old v1beta1.ProvisioningRequest
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &old, true); err != nil {
		t.Fatalf("decoding the v1beta1 object strictly: %v", err)
	}
	if old.APIVersion != "autoscaling.x-k8s.io/v1beta1" || old.UID != created.UID {
		t.Errorf("v1beta1 object: apiVersion %q uid %q", old.APIVersion, old.UID)
	}
	wantOld := v1beta1.ProvisioningRequestSpec{
		PodSets: []v1beta1.PodSet{
			{PodTemplateRef: v1beta1.Reference{Name: "ppt-job-a-prov-1-main"}, Count: 3},
			{PodTemplateRef: v1beta1.Reference{Name: "ppt-job-a-prov-1-workers"}, Count: 5},
		},
		ProvisioningClassName: provreq.ClassCheckCapacity,
		Parameters:            map[string]v1beta1.Parameter{provreq.ParamNoRetry: "true", provreq.ParamValidUntilSeconds: "60", "maxRunDurationSeconds": "3600"},
	}
	if diff := cmp.Diff(wantOld, old.Spec); diff != "" {
		t.Errorf("v1beta1 spec (-want +got):\n%s", diff)
	}
	if ws := w.all(); !slices.Contains(ws, "autoscaling.k8s.io/v1beta1 API is deprecated") {
		t.Errorf("v1beta1 warnings %q, want the deprecation warning", ws)
	}
	d, set, err := provreq.ParseValidUntilSeconds(got.Spec.Parameters)
	if d != time.Minute || !set || err != nil {
		t.Errorf("ValidUntilSeconds of the stored request = %v, %v, %v", d, set, err)
	}
}

// validRequest is a request that the API server accepts; the cases below
// break one rule each.
func validRequest(ns, name string) *v1.ProvisioningRequest {
	return &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.ProvisioningRequestSpec{
			PodSets:               []v1.PodSet{{PodTemplateRef: v1.Reference{Name: "ppt-" + name + "-main"}, Count: 1}},
			ProvisioningClassName: provreq.ClassBestEffortAtomicScaleUp,
		},
	}
}

func podSets(n int) []v1.PodSet {
	sets := make([]v1.PodSet, n)
	for i := range sets {
		sets[i] = v1.PodSet{PodTemplateRef: v1.Reference{Name: "ppt-x-" + strings.Repeat("a", i+1)}, Count: 1}
	}
	return sets
}

func params(n int) map[string]v1.Parameter {
	m := make(map[string]v1.Parameter, n)
	for i := range n {
		m["key"+strings.Repeat("k", i)] = "v"
	}
	return m
}

func TestAPIServerValidatesSpec(t *testing.T) {
	env, c := setup(t)
	ctx := env.Context()
	prs := c.ProvisioningRequests(env.Namespace)
	tests := []struct {
		name    string
		mutate  func(*v1.ProvisioningRequest)
		invalid bool
	}{
		{name: "valid", mutate: func(*v1.ProvisioningRequest) {}},
		{name: "at every limit", mutate: func(pr *v1.ProvisioningRequest) {
			pr.Spec.PodSets = podSets(32)
			pr.Spec.PodSets[0].Count = 1 << 20 // no upper bound on count
			pr.Spec.PodSets[1].PodTemplateRef.Name = strings.Repeat("a", 253)
			pr.Spec.ProvisioningClassName = strings.Repeat("c", 200) + ".example.com"
			pr.Spec.Parameters = params(100)
			pr.Spec.Parameters["key"] = v1.Parameter(strings.Repeat("v", 255))
		}},
		{name: "33 pod sets", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets = podSets(33) }, invalid: true},
		{name: "no pod sets", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets = []v1.PodSet{} }, invalid: true},
		{name: "pod sets missing", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets = nil }, invalid: true},
		{name: "count 0", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets[0].Count = 0 }, invalid: true},
		{name: "count negative", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets[0].Count = -3 }, invalid: true},
		{name: "template name missing", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets[0].PodTemplateRef.Name = "" }, invalid: true},
		{name: "template name not a DNS subdomain", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets[0].PodTemplateRef.Name = "Ppt_Main" }, invalid: true},
		{name: "template name too long", mutate: func(pr *v1.ProvisioningRequest) {
			pr.Spec.PodSets[0].PodTemplateRef.Name = strings.Repeat("a", 254)
		}, invalid: true},
		{name: "class missing", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.ProvisioningClassName = "" }, invalid: true},
		{name: "class not a DNS subdomain", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.ProvisioningClassName = "Check-Capacity" }, invalid: true},
		{name: "class too long", mutate: func(pr *v1.ProvisioningRequest) {
			pr.Spec.ProvisioningClassName = strings.Repeat("c", 251) + ".io"
		}, invalid: true},
		{name: "101 parameters", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.Parameters = params(101) }, invalid: true},
		{name: "parameter value too long", mutate: func(pr *v1.ProvisioningRequest) {
			pr.Spec.Parameters = map[string]v1.Parameter{"k": v1.Parameter(strings.Repeat("v", 256))}
		}, invalid: true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr := validRequest(env.Namespace, framework.UniqueName("pr"))
			tc.mutate(pr)
			_, err := prs.Create(ctx, pr, metav1.CreateOptions{})
			if err != nil {
				t.Logf("refused: %v", err)
			}
			switch {
			case tc.invalid && !apierrors.IsInvalid(err):
				t.Errorf("case %d: Create error = %v, want Invalid", i, err)
			case !tc.invalid && err != nil:
				t.Errorf("case %d: Create error = %v, want success", i, err)
			}
		})
	}
}

func TestAPIServerKeepsSpecImmutable(t *testing.T) {
	env, c := setup(t)
	ctx := env.Context()
	prs := c.ProvisioningRequests(env.Namespace)
	base := validRequest(env.Namespace, "immutable")
	base.Spec.Parameters = map[string]v1.Parameter{provreq.ParamNoRetry: "false"}
	created, err := prs.Create(ctx, base, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*v1.ProvisioningRequest)
		ok     bool
	}{
		{name: "class", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.ProvisioningClassName = provreq.ClassCheckCapacity }},
		{name: "count", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets[0].Count = 2 }},
		{name: "template", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets[0].PodTemplateRef.Name = "other" }},
		{name: "extra pod set", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.PodSets = append(pr.Spec.PodSets, pr.Spec.PodSets[0]) }},
		{name: "parameter value", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.Parameters[provreq.ParamNoRetry] = "true" }},
		{name: "parameter added", mutate: func(pr *v1.ProvisioningRequest) { pr.Spec.Parameters["extra"] = "1" }},
		{name: "labels stay mutable", mutate: func(pr *v1.ProvisioningRequest) { pr.Labels = map[string]string{"team": "a"} }, ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := prs.Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(cur)
			_, err = prs.Update(ctx, cur, metav1.UpdateOptions{})
			if tc.ok && err != nil {
				t.Errorf("Update error = %v, want success", err)
			}
			if !tc.ok && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Value is immutable")) {
				t.Errorf("Update error = %v, want Invalid: Value is immutable", err)
			}
		})
	}
	final, err := prs.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created.Spec, final.Spec); diff != "" {
		t.Errorf("spec changed (-created +final):\n%s", diff)
	}
}
