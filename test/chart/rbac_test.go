package chart_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// fieldManager is the server-side apply manager the test installs with.
const fieldManager = "chart-test"

// resources maps the kinds the chart renders for RBAC and configuration to
// their API resources.
var resources = map[string]schema.GroupVersionResource{
	"ServiceAccount":           {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":                {Version: "v1", Resource: "configmaps"},
	"Role":                     {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":              {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":       {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"CustomResourceDefinition": {Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
}

// installed is a chart release applied to the control plane: its RBAC, its
// ConfigMaps and its CRD, not its Deployment (there is no kubelet to run it).
type installed struct {
	env            *framework.Env
	manifest       manifest
	serviceAccount string
}

// user is the service account's user name.
func (in *installed) user() string {
	return "system:serviceaccount:" + in.env.Namespace + ":" + in.serviceAccount
}

// groups are the groups a service account's token carries.
func (in *installed) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + in.env.Namespace, "system:authenticated"}
}

// install renders the chart as a uniquely named release into the test's
// namespace (written for $NAMESPACE in values) and applies what it can with
// server-side apply. Cluster-scoped
// objects are deleted when the test ends, except the CRD, which other test
// packages sharing a reused control plane may be using (it is the same CRD).
func install(t *testing.T, values string) *installed {
	t.Helper()
	env := framework.New(t)
	rel := framework.UniqueName("ca")
	m := render(t, rel, env.Namespace, strings.ReplaceAll(values, "$NAMESPACE", env.Namespace), "--include-crds")
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := env.Context()
	in := &installed{env: env, manifest: m}
	// The CRD first, as Helm does.
	slices.SortStableFunc(m, func(a, b *unstructured.Unstructured) int {
		return boolCmp(b.GetKind() == "CustomResourceDefinition", a.GetKind() == "CustomResourceDefinition")
	})
	for _, o := range m {
		gvr, ok := resources[o.GetKind()]
		if !ok {
			continue // Deployment, Service, PodDisruptionBudget: nothing to run them
		}
		var ri dynamic.ResourceInterface = dyn.Resource(gvr)
		if ns := o.GetNamespace(); ns != "" {
			ri = dyn.Resource(gvr).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
			t.Cleanup(func() {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := ri.Delete(cctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			})
		case "ServiceAccount":
			in.serviceAccount = o.GetName()
		case "CustomResourceDefinition":
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
			versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
			version, _, _ := unstructured.NestedString(versions[len(versions)-1].(map[string]any), "name")
			env.Eventually(30*time.Second, "CRD "+o.GetName()+" is served", func(context.Context) (bool, error) {
				list, err := env.Client.Discovery().ServerResourcesForGroupVersion(group + "/" + version)
				return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
					return r.Name == plural
				}), nil
			})
		}
	}
	if in.serviceAccount == "" {
		t.Fatal("the chart rendered no ServiceAccount")
	}
	return in
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// can asks the API server's authorizer (SubjectAccessReview) whether the
// service account may do p in namespace ("" for cluster-wide).
func (in *installed) can(t *testing.T, namespace string, p permission) bool {
	t.Helper()
	resource, subresource, _ := strings.Cut(p.resource, "/")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: in.user(), Groups: in.groups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: p.verb, Group: p.group, Resource: resource, Subresource: subresource, Name: p.name,
		},
	}}
	got, err := in.env.Client.AuthorizationV1().SubjectAccessReviews().Create(in.env.Context(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SubjectAccessReview %v: %v", p, err)
	}
	return got.Status.Allowed
}

// impersonated returns a client config acting as the service account.
func (in *installed) impersonated() *rest.Config {
	cfg := rest.CopyConfig(in.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: in.user(), Groups: in.groups()}
	return cfg
}

// TestRenderedRBACAuthorizesTheAutoscaler applies the default release's RBAC
// and asks the API server's RBAC authorizer about every permission the
// autoscaler uses (cluster-wide, and in its namespace) and a few it must not
// have.
func TestRenderedRBACAuthorizesTheAutoscaler(t *testing.T) {
	in := install(t, "cloudProvider: kwok\n")
	ns := in.env.Namespace
	// The authorizer learns about new bindings through its informers.
	first := clusterPermissions()[0]
	in.env.Eventually(10*time.Second, "the RBAC authorizer sees the bindings", func(context.Context) (bool, error) {
		return in.can(t, "", first), nil
	})
	for _, p := range clusterPermissions() {
		if !in.can(t, "", p) {
			t.Errorf("cluster-wide: %v denied", p)
		}
	}
	for _, p := range namespacePermissions("cluster-autoscaler-status", "cluster-autoscaler") {
		if !in.can(t, ns, p) {
			t.Errorf("in %s: %v denied", ns, p)
		}
		// Upstream's chart grants the Lease rules cluster-wide too; a ConfigMap
		// is written only in the release namespace.
		if p.verb != "get" && p.verb != "list" && p.verb != "watch" && p.group != "coordination.k8s.io" && in.can(t, "default", p) {
			t.Errorf("in another namespace: %v allowed", p)
		}
	}
	for _, p := range forbiddenPermissions() {
		if in.can(t, "", p) || in.can(t, ns, p) {
			t.Errorf("%v allowed; the autoscaler does not need it", p)
		}
	}
}

// TestServiceAccountCanDoTheAutoscalersWrites makes the autoscaler's
// requests, impersonating the chart's service account: list nodes, watch and
// delete ProvisioningRequests and write their status, evict a pod, write the
// status ConfigMap, take the Lease, record an event; and is refused a write to
// a ConfigMap it does not own.
func TestServiceAccountCanDoTheAutoscalersWrites(t *testing.T) {
	in := install(t, "cloudProvider: kwok\n")
	env, ns := in.env, in.env.Namespace
	ctx := env.Context()
	sa, err := kubernetes.NewForConfig(in.impersonated())
	if err != nil {
		t.Fatal(err)
	}
	env.Eventually(10*time.Second, "the service account can list nodes", func(ctx context.Context) (bool, error) {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})

	t.Run("provisioningrequests", func(t *testing.T) {
		admin, err := client.NewForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		saPR, err := client.NewForConfig(in.impersonated())
		if err != nil {
			t.Fatal(err)
		}
		w, err := saPR.ProvisioningRequests("").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watching ProvisioningRequests in all namespaces: %v", err)
		}
		defer w.Stop()
		pr := &v1.ProvisioningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: ns},
			Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: provreq.ClassCheckCapacity,
				PodSets: []v1.PodSet{{PodTemplateRef: v1.Reference{Name: "job-template"}, Count: 2}}},
		}
		if _, err := admin.ProvisioningRequests(ns).Create(ctx, pr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitForEvent(t, w, watch.Added, pr.Name)
		status := v1.ProvisioningRequestStatus{Conditions: []metav1.Condition{{
			Type: provreq.ConditionAccepted, Status: metav1.ConditionTrue, Reason: provreq.ReasonAccepted,
			Message: "accepted by the chart test", LastTransitionTime: metav1.Now(),
		}}}
		if _, err := saPR.ProvisioningRequests(ns).ApplyStatus(ctx, pr.Name, status,
			metav1.ApplyOptions{FieldManager: "cluster-autoscaler", Force: true}); err != nil {
			t.Errorf("writing conditions: %v", err)
		}
		if err := saPR.ProvisioningRequests(ns).Delete(ctx, pr.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting a ProvisioningRequest (garbage collection): %v", err)
		}
	})

	t.Run("eviction", func(t *testing.T) {
		pod := framework.MakePod(ns, "victim").Obj()
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}}
		if err := sa.PolicyV1().Evictions(ns).Evict(ctx, ev); err != nil {
			t.Errorf("evicting a pod: %v", err)
		}
	})

	t.Run("status configmap", func(t *testing.T) {
		cms := sa.CoreV1().ConfigMaps(ns)
		cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler-status"}, Data: map[string]string{"status": "a"}}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating the status ConfigMap: %v", err)
		}
		created.Data["status"] = "b"
		if _, err := cms.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Errorf("updating the status ConfigMap: %v", err)
		}
		if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the status ConfigMap: %v", err)
		}
		other := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}, Data: map[string]string{"k": "v"}}
		if other, err = env.Client.CoreV1().ConfigMaps(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		other.Data["k"] = "changed"
		if _, err := cms.Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("updating a ConfigMap the autoscaler does not own: err %v, want Forbidden", err)
		}
	})

	t.Run("attempt records", func(t *testing.T) {
		records := client.NewConfigMapRecords(sa, ns, processor.RecordsConfigMap)
		if _, err := records.Load(ctx); err != nil {
			t.Fatalf("reading the records: %v", err)
		}
		for _, data := range []map[string]string{{"uid-a": "{}"}, {"uid-b": "{}"}} { // a create, then an update
			if err := records.Save(ctx, data); err != nil {
				t.Errorf("writing the records: %v", err)
			}
		}
	})

	t.Run("lease", func(t *testing.T) {
		leases := sa.CoordinationV1().Leases(ns)
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("replica-a"), LeaseDurationSeconds: ptr.To[int32](15)}}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the Lease: %v", err)
		}
		got, err := leases.Get(ctx, lease.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading the Lease: %v", err)
		}
		got.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		if _, err := leases.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Errorf("renewing the Lease: %v", err)
		}
	})

	t.Run("event", func(t *testing.T) {
		ev := &apiv1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: framework.UniqueName("ev"), Namespace: ns},
			InvolvedObject: apiv1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: "cluster-autoscaler-status"},
			Reason:         "ScaledUpGroup", Message: "chart test", Type: apiv1.EventTypeNormal,
			Source: apiv1.EventSource{Component: "cluster-autoscaler"},
		}
		if _, err := sa.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Errorf("recording an event: %v", err)
		}
	})
}

func waitForEvent(t *testing.T, w watch.Interface, typ watch.EventType, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s %s", typ, name)
			}
			if pr, isPR := ev.Object.(*v1.ProvisioningRequest); isPR && ev.Type == typ && pr.Name == name {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event for %s within 10s", typ, name)
		}
	}
}
