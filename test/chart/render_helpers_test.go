package chart_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart under test, relative to the repository root.
const chartDir = "charts/cluster-autoscaler"

// manifest is what one helm template run produced.
type manifest []*unstructured.Unstructured

// render runs helm template for release into namespace with values (YAML,
// may be empty) and extra helm flags, and decodes every document.
func render(t *testing.T, release, namespace, values string, flags ...string) manifest {
	t.Helper()
	out, err := helmTemplate(t, release, namespace, values, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// helmTemplate runs helm template and returns its standard output, or an
// error carrying its standard error.
func helmTemplate(t *testing.T, release, namespace, values string, flags ...string) ([]byte, error) {
	t.Helper()
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(valuesFile, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template", release, filepath.Join(repoRoot, chartDir),
		"--namespace", namespace, "--values", valuesFile}, flags...)
	cmd := helm(t, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// helm returns a helm command kept away from the user's configuration and
// caches.
func helm(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(helmBinary, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	return cmd
}

// decode splits a multi-document YAML stream and decodes each non-empty
// document with sigs.k8s.io/yaml.
func decode(t *testing.T, stream []byte) manifest {
	t.Helper()
	var out manifest
	for i, doc := range splitDocuments(stream) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("document %d of the rendered chart: %v\n%s", i, err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

func splitDocuments(stream []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	for line := range bytes.Lines(stream) {
		if string(bytes.TrimRight(line, " \r\n")) == "---" {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(line)
	}
	return append(docs, cur.Bytes())
}

// kinds lists the kind of every object, sorted.
func (m manifest) kinds() []string {
	var out []string
	for _, o := range m {
		out = append(out, o.GetKind())
	}
	slices.Sort(out)
	return out
}

// all returns the objects of one kind.
func (m manifest) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range m {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one decodes the only object of kind into into, strictly: a field the type
// does not have fails the test, so a misspelt key in a template is caught.
func (m manifest) one(t *testing.T, kind string, into runtime.Object) {
	t.Helper()
	objs := m.all(kind)
	if len(objs) != 1 {
		t.Fatalf("want one %s, got %d (kinds: %v)", kind, len(objs), m.kinds())
	}
	convert(t, objs[0], into)
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func (m manifest) deployment(t *testing.T) (*appsv1.Deployment, apiv1.Container) {
	t.Helper()
	d := &appsv1.Deployment{}
	m.one(t, "Deployment", d)
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("want one container, got %d", n)
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

// rbac is the rendered ClusterRole's and Role's rules.
func (m manifest) rbac(t *testing.T) (cluster, namespaced []rbacv1.PolicyRule) {
	t.Helper()
	cr, r := &rbacv1.ClusterRole{}, &rbacv1.Role{}
	m.one(t, "ClusterRole", cr)
	m.one(t, "Role", r)
	return cr.Rules, r.Rules
}

// permission is one request the autoscaler makes: verb on group/resource
// (resource may be resource/subresource), optionally on one named object.
type permission struct {
	group, resource, verb, name string
}

func (p permission) String() string {
	s := p.verb + " " + p.resource
	if p.group != "" {
		s += "." + p.group
	}
	if p.name != "" {
		s += " " + p.name
	}
	return s
}

// perms expands verbs (space-separated) into permissions.
func perms(group, resource, verbs string) []permission {
	var out []permission
	for _, v := range strings.Fields(verbs) {
		out = append(out, permission{group: group, resource: resource, verb: v})
	}
	return out
}

func named(name string, ps []permission) []permission {
	for i := range ps {
		ps[i].name = name
	}
	return ps
}

// clusterPermissions is what the autoscaler (with the kwok provider) asks of
// the API server cluster-wide, and why:
func clusterPermissions() []permission {
	return slices.Concat(
		// node informer, start-up API check, taints (update), the kwok provider's instances (create, delete)
		perms("", "nodes", "get list watch update create delete"),
		// pod informer; drain by eviction
		perms("", "pods", "get list watch"),
		perms("", "pods/eviction", "create"),
		// the event recorder
		perms("", "events", "create patch"),
		// informers of the scheduler framework (simulator/framework) and of the drain rules
		perms("", "namespaces", "get list watch"),
		perms("", "services", "get list watch"),
		perms("", "replicationcontrollers", "get list watch"),
		perms("", "persistentvolumes", "get list watch"),
		perms("", "persistentvolumeclaims", "get list watch"),
		perms("apps", "daemonsets", "get list watch"),
		perms("apps", "replicasets", "get list watch"),
		perms("apps", "statefulsets", "get list watch"),
		perms("batch", "jobs", "get list watch"),
		perms("policy", "poddisruptionbudgets", "list watch"),
		perms("storage.k8s.io", "storageclasses", "get list watch"),
		perms("storage.k8s.io", "csinodes", "get list watch"),
		perms("storage.k8s.io", "csidrivers", "get list watch"),
		perms("storage.k8s.io", "csistoragecapacities", "get list watch"),
		perms("storage.k8s.io", "volumeattachments", "get list watch"),
		perms("resource.k8s.io", "resourceclaims", "get list watch"),
		perms("resource.k8s.io", "resourceclaimtemplates", "list watch"),
		perms("resource.k8s.io", "resourceslices", "get list watch"),
		perms("resource.k8s.io", "deviceclasses", "get list watch"),
		// ProvisioningRequests: informer, conditions (server-side apply to status), garbage collection (delete)
		perms("autoscaling.x-k8s.io", "provisioningrequests", "get list watch delete"),
		perms("autoscaling.x-k8s.io", "provisioningrequests/status", "get update patch"),
		// CapacityQuotas (--capacity-quotas-enabled): the informer, status.used
		perms("autoscaling.x-k8s.io", "capacityquotas", "get list watch"),
		perms("autoscaling.x-k8s.io", "capacityquotas/status", "update patch"),
		// CapacityBuffers: informer; the controller's translation and the Provisioning condition
		// (server-side apply to status)
		perms("autoscaling.x-k8s.io", "capacitybuffers", "get list watch"),
		perms("autoscaling.x-k8s.io", "capacitybuffers/status", "update patch"),
		perms("", "podtemplates", "get list watch"),
	)
}

// namespacePermissions is what it asks in --namespace (the release namespace).
func namespacePermissions(statusConfigMap, lease string) []permission {
	return slices.Concat(
		// priority expander ConfigMap informer, kwok provider config, status and state reads
		perms("", "configmaps", "get list watch create"),
		named(statusConfigMap, perms("", "configmaps", "get update delete")),
		named("cluster-autoscaler-provisioning-attempts", perms("", "configmaps", "get update")),
		named("cluster-autoscaler-healing", perms("", "configmaps", "get update")),
		named("kwok-provider-state", perms("", "configmaps", "get update")),
		named("kwok-provider-config", perms("", "configmaps", "get")),
		named("cluster-autoscaler-priority-expander", perms("", "configmaps", "get list watch")),
		// leader election
		perms("coordination.k8s.io", "leases", "create"),
		named(lease, perms("coordination.k8s.io", "leases", "get update")),
	)
}

// forbiddenPermissions must not be granted: the chart grants no more than the
// autoscaler needs.
func forbiddenPermissions() []permission {
	return []permission{
		{resource: "pods", verb: "delete"},
		{resource: "secrets", verb: "get"},
		{resource: "secrets", verb: "list"},
		{resource: "configmaps", verb: "update", name: "coredns"},
		{resource: "configmaps", verb: "delete", name: "kwok-provider-config"},
		{group: "coordination.k8s.io", resource: "leases", verb: "update", name: "kube-scheduler"},
		{group: "autoscaling.x-k8s.io", resource: "provisioningrequests", verb: "create"},
		{group: "autoscaling.x-k8s.io", resource: "capacitybuffers", verb: "create"},
		{group: "autoscaling.x-k8s.io", resource: "capacitybuffers", verb: "delete"},
		{group: "rbac.authorization.k8s.io", resource: "clusterroles", verb: "create"},
	}
}

// allows reports whether rules grant p, as the RBAC authorizer decides.
func allows(rules []rbacv1.PolicyRule, p permission) bool {
	for _, r := range rules {
		if matches(r.APIGroups, p.group) && matches(r.Resources, p.resource) && matches(r.Verbs, p.verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, p.name)) {
			return true
		}
	}
	return false
}

func matches(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, "*")
}
