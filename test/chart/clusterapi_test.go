package chart_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/clusterapi"
	"k8s.io/autoscaler/cluster-autoscaler/test/capi"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// capiPermissions is what the clusterapi provider asks of the management
// cluster's API server (cloudprovider/clusterapi): informers over the
// scalable kinds and Machines, the scale subresource read and written back,
// the delete-machine annotation patched onto a Machine, and infrastructure
// templates read for scale from zero (any kind of that group; one example).
func capiPermissions(group string) []permission {
	return slices.Concat(
		perms(group, "machinedeployments", "get list watch"),
		perms(group, "machinesets", "get list watch"),
		perms(group, "machinepools", "get list watch"),
		perms(group, "machines", "get list watch patch"),
		perms(group, "machinedeployments/scale", "get update"),
		perms(group, "machinesets/scale", "get update"),
		perms(group, "machinepools/scale", "get update"),
		perms("infrastructure.cluster.x-k8s.io", "dockermachinetemplates", "get"),
	)
}

// capiForbidden must not be granted: the provider changes sizes only through
// the scale subresource, never deletes or creates Cluster API objects, and
// has no business with Clusters or with the kubeconfig Secrets next to them.
func capiForbidden(group string) []permission {
	return slices.Concat(
		perms(group, "machinedeployments", "create patch delete"),
		perms(group, "machinesets", "patch delete"),
		perms(group, "machinepools", "patch delete"),
		perms(group, "machines", "create delete"),
		perms(group, "clusters", "get update"),
		perms("infrastructure.cluster.x-k8s.io", "dockermachinetemplates", "update delete"),
		perms("", "secrets", "get list"),
	)
}

// workloadPermissions is what the autoscaler asks of the workload cluster
// with a provider whose instances are not Node objects: the kwok-only node
// create/delete left out.
func workloadPermissions() []permission {
	return slices.DeleteFunc(clusterPermissions(), func(p permission) bool {
		return p.resource == "nodes" && (p.verb == "create" || p.verb == "delete")
	})
}

// workloadNamespacePermissions is namespacePermissions without the kwok
// provider's state ConfigMap.
func workloadNamespacePermissions() []permission {
	return slices.DeleteFunc(namespacePermissions("cluster-autoscaler-status", "cluster-autoscaler"), func(p permission) bool {
		return p.name == "kwok-provider-state"
	})
}

// TestClusterAPIModes renders every clusterAPIMode and checks the arguments
// (which the real binary parses), the kubeconfig Secret's volume and mount,
// and which RBAC objects and rules are rendered in the cluster installed into.
func TestClusterAPIModes(t *testing.T) {
	base := []string{"--cloud-provider=clusterapi"}
	tail := []string{"--logtostderr=true", "--stderrthreshold=info", "--v=4"}
	for _, tc := range []struct {
		mode, extra string
		args        []string // between --cloud-provider and extraArgs
		mountDir    string   // "" for no mount of the Secret
		// which RBAC this cluster gets
		workloadRules, capiRules bool
	}{{
		mode: "incluster-incluster",
		args: []string{"--namespace=kube-system"}, workloadRules: true, capiRules: true,
	}, {
		mode: "incluster-kubeconfig", extra: "clusterAPIKubeconfigSecret: mgmt\n",
		args:     []string{"--namespace=kube-system", "--cloud-config=/etc/kubernetes/mgmt-kubeconfig"},
		mountDir: "/etc/kubernetes", workloadRules: true,
	}, {
		mode: "incluster-kubeconfig", extra: "clusterAPIKubeconfigSecret: mgmt\nclusterAPICloudConfigPath: /etc/capi/mgmt/config\n",
		args:     []string{"--namespace=kube-system", "--cloud-config=/etc/capi/mgmt/config"},
		mountDir: "/etc/capi/mgmt", workloadRules: true,
	}, {
		mode: "kubeconfig-incluster", extra: "clusterAPIKubeconfigSecret: workload-kubeconfig\n",
		args: []string{"--namespace=kube-system", "--kubeconfig=/etc/kubernetes/value",
			"--clusterapi-cloud-config-authoritative"},
		mountDir: "/etc/kubernetes", capiRules: true,
	}, {
		mode: "kubeconfig-incluster",
		extra: "clusterAPIKubeconfigSecret: workload-kubeconfig\nclusterAPIWorkloadKubeconfigPath: /etc/workload/kubeconfig\n" +
			"clusterAPIConfigMapsNamespace: autoscaler\n",
		args: []string{"--namespace=autoscaler", "--kubeconfig=/etc/workload/kubeconfig",
			"--clusterapi-cloud-config-authoritative"},
		mountDir: "/etc/workload", capiRules: true,
	}, {
		mode: "kubeconfig-kubeconfig", extra: "clusterAPIKubeconfigSecret: both\n",
		args: []string{"--namespace=kube-system", "--kubeconfig=/etc/kubernetes/value",
			"--cloud-config=/etc/kubernetes/mgmt-kubeconfig"},
		mountDir: "/etc/kubernetes",
	}, {
		// No Secret: the files come from extraVolumes.
		mode: "kubeconfig-kubeconfig", extra: "clusterAPIConfigMapsNamespace: autoscaler\n",
		args: []string{"--namespace=autoscaler", "--kubeconfig=/etc/kubernetes/value",
			"--cloud-config=/etc/kubernetes/mgmt-kubeconfig"},
	}, {
		mode: "single-kubeconfig", extra: "clusterAPIKubeconfigSecret: one\n",
		args:     []string{"--namespace=kube-system", "--kubeconfig=/etc/kubernetes/value"},
		mountDir: "/etc/kubernetes",
	}} {
		t.Run(tc.mode, func(t *testing.T) {
			m := render(t, release, namespace, "cloudProvider: clusterapi\nclusterAPIMode: "+tc.mode+"\n"+tc.extra)
			d, c := m.deployment(t)
			want := slices.Concat(base, tc.args, tail)
			if diff := cmp.Diff(want, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			checkArgsParse(t, c.Args)

			vols := d.Spec.Template.Spec.Volumes
			if tc.mountDir == "" {
				if len(vols) != 0 || len(c.VolumeMounts) != 0 {
					t.Errorf("volumes %+v, mounts %+v; want none", vols, c.VolumeMounts)
				}
			} else {
				secret := strings.TrimSpace(strings.TrimPrefix(strings.Split(tc.extra, "\n")[0], "clusterAPIKubeconfigSecret:"))
				wantVols := []apiv1.Volume{{Name: "cluster-api-kubeconfig",
					VolumeSource: apiv1.VolumeSource{Secret: &apiv1.SecretVolumeSource{SecretName: secret}}}}
				wantMounts := []apiv1.VolumeMount{{Name: "cluster-api-kubeconfig", MountPath: tc.mountDir, ReadOnly: true}}
				if diff := cmp.Diff(wantVols, vols); diff != "" {
					t.Errorf("volumes (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantMounts, c.VolumeMounts); diff != "" {
					t.Errorf("mounts (-want +got):\n%s", diff)
				}
			}

			kinds := m.kinds()
			hasCR, hasRole := slices.Contains(kinds, "ClusterRole"), slices.Contains(kinds, "Role")
			if hasCR != (tc.workloadRules || tc.capiRules) || slices.Contains(kinds, "ClusterRoleBinding") != hasCR {
				t.Errorf("kinds %v: ClusterRole and binding rendered %v, want %v", kinds, hasCR, tc.workloadRules || tc.capiRules)
			}
			if hasRole != tc.workloadRules || slices.Contains(kinds, "RoleBinding") != hasRole {
				t.Errorf("kinds %v: Role and binding rendered %v, want %v", kinds, hasRole, tc.workloadRules)
			}
			if !slices.Contains(kinds, "ServiceAccount") {
				t.Errorf("kinds %v: no ServiceAccount", kinds)
			}
			if !hasCR {
				return
			}
			cr := &rbacv1.ClusterRole{}
			m.one(t, "ClusterRole", cr)
			rules := cr.Rules
			for _, p := range capiPermissions("cluster.x-k8s.io") {
				if allows(rules, p) != tc.capiRules {
					t.Errorf("ClusterRole grants %v: %v, want %v", p, !tc.capiRules, tc.capiRules)
				}
			}
			for _, p := range workloadPermissions() {
				if allows(rules, p) != tc.workloadRules {
					t.Errorf("ClusterRole grants %v: %v, want %v", p, !tc.workloadRules, tc.workloadRules)
				}
			}
			for _, p := range slices.Concat(capiForbidden("cluster.x-k8s.io"), forbiddenPermissions()) {
				if allows(rules, p) {
					t.Errorf("ClusterRole grants %v; the autoscaler does not need it", p)
				}
			}
		})
	}
}

// CAPI_GROUP in extraEnv sets the environment variable and moves the Cluster
// API rules to that group.
func TestClusterAPIGroupFromExtraEnv(t *testing.T) {
	m := render(t, release, namespace, "cloudProvider: clusterapi\nextraEnv: {CAPI_GROUP: cluster.k8s.io, CAPI_VERSION: v1alpha1}\n")
	_, c := m.deployment(t)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["CAPI_GROUP"] != "cluster.k8s.io" || env["CAPI_VERSION"] != "v1alpha1" {
		t.Errorf("env %v", c.Env)
	}
	cluster, _ := m.rbac(t)
	for _, p := range capiPermissions("cluster.k8s.io") {
		if !allows(cluster, p) {
			t.Errorf("ClusterRole does not grant %v", p)
		}
	}
	if p := (permission{group: "cluster.x-k8s.io", resource: "machines", verb: "patch"}); allows(cluster, p) {
		t.Errorf("ClusterRole still grants %v with CAPI_GROUP cluster.k8s.io", p)
	}
}

// autoDiscovery renders one --node-group-auto-discovery that the provider
// parses; the cluster name goes through tpl.
func TestClusterAPIAutoDiscovery(t *testing.T) {
	m := render(t, release, namespace, `
cloudProvider: clusterapi
autoDiscovery:
  clusterName: '{{ .Release.Name }}-workers'
  namespace: capi-clusters
  labels:
  - environment: production
  - team: a
    tier: 1
`)
	_, c := m.deployment(t)
	const want = "--node-group-auto-discovery=clusterapi:namespace=capi-clusters,clusterName=rel-workers,environment=production,team=a,tier=1"
	var got []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--node-group-auto-discovery") {
			got = append(got, a)
		}
	}
	if diff := cmp.Diff([]string{want}, got); diff != "" {
		t.Errorf("auto-discovery args (-want +got):\n%s", diff)
	}
	if _, err := clusterapi.WithAutoDiscovery([]string{strings.TrimPrefix(want, "--node-group-auto-discovery=")}); err != nil {
		t.Errorf("the provider rejects the rendered spec: %v", err)
	}
	checkArgsParse(t, c.Args)

	// Each key alone.
	for values, spec := range map[string]string{
		"autoDiscovery: {namespace: ns}\n":                   "clusterapi:namespace=ns",
		"autoDiscovery: {clusterName: c}\n":                  "clusterapi:clusterName=c",
		"autoDiscovery: {labels: [{k: v}]}\n":                "clusterapi:k=v",
		"autoDiscovery: {tags: [a], roles: [worker]}\n":      "",
		"autoDiscovery: {clusterName: '', labels: []}\n":     "",
		"autoDiscovery: {labels: [{enabled: true}]}\n":       "clusterapi:enabled=true",
		"autoDiscovery: {namespace: ns, labels: [{a: b}]}\n": "clusterapi:namespace=ns,a=b",
	} {
		_, c := render(t, release, namespace, "cloudProvider: clusterapi\n"+values).deployment(t)
		var got string
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--node-group-auto-discovery="); ok {
				got = v
			}
		}
		if got != spec {
			t.Errorf("%s: spec %q, want %q", strings.TrimSpace(values), got, spec)
		}
	}
}

// Values that cannot work stop the render with a message naming them.
func TestClusterAPIValuesFail(t *testing.T) {
	for name, tc := range map[string]struct{ values, want string }{
		"unknown mode": {"clusterAPIMode: kubeconfig-management\n",
			`clusterAPIMode "kubeconfig-management" is not a Cluster API mode; use one of incluster-incluster, incluster-kubeconfig, kubeconfig-incluster, kubeconfig-kubeconfig, single-kubeconfig`},
		"secret but no kubeconfig read": {"clusterAPIKubeconfigSecret: kc\n",
			"clusterAPIKubeconfigSecret is set, but clusterAPIMode incluster-incluster reads no kubeconfig"},
		"relative workload path": {"clusterAPIMode: single-kubeconfig\nclusterAPIWorkloadKubeconfigPath: value\n",
			`clusterAPIWorkloadKubeconfigPath "value" must be an absolute file path`},
		"workload path at the root": {"clusterAPIMode: kubeconfig-incluster\nclusterAPIWorkloadKubeconfigPath: /value\n",
			`clusterAPIWorkloadKubeconfigPath "/value" must be an absolute file path`},
		"empty management path": {"clusterAPIMode: incluster-kubeconfig\nclusterAPICloudConfigPath: ''\n",
			`clusterAPICloudConfigPath "" must be an absolute file path`},
		"configmaps namespace in-cluster": {"clusterAPIConfigMapsNamespace: autoscaler\n",
			"clusterAPIConfigMapsNamespace applies only when the workload cluster is reached through a kubeconfig"},
		"bad configmaps namespace": {"clusterAPIMode: single-kubeconfig\nclusterAPIConfigMapsNamespace: Kube_System\n",
			`clusterAPIConfigMapsNamespace "Kube_System" is not a namespace name`},
		"cloudConfigPath": {"cloudConfigPath: /etc/capi.conf\n",
			"cloudConfigPath is not used with cloudProvider clusterapi"},
		"autoscalingGroups": {"autoscalingGroups: [{name: a, minSize: 0, maxSize: 3}]\n",
			"autoscalingGroups is not used with cloudProvider clusterapi"},
		"comma in a discovery value": {"autoDiscovery: {clusterName: 'a,b'}\n",
			`autoDiscovery.clusterName "a,b": must be non-empty and hold no ',' or '='`},
		"equals in a label key": {"autoDiscovery: {labels: [{'a=b': c}]}\n",
			`autoDiscovery.labels[0] key "a=b"`},
		"empty label value": {"autoDiscovery: {labels: [{a: ''}]}\n",
			`autoDiscovery.labels[0].a ""`},
		"label not a map": {"autoDiscovery: {labels: [env=prod]}\n",
			"autoDiscovery.labels[0] must be a map of label to value"},
		"labels not a list": {"autoDiscovery: {labels: {env: prod}}\n",
			"autoDiscovery.labels must be a list of maps"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := helmTemplate(t, release, namespace, "cloudProvider: clusterapi\n"+tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestClusterAPIRBACAuthorizes applies each mode's rendered RBAC to the API
// server and asks its authorizer (SubjectAccessReview) about the provider's
// calls, the workload cluster's calls and what must never be granted: each
// cluster gets only the rules of the role it plays in the mode.
func TestClusterAPIRBACAuthorizes(t *testing.T) {
	for _, tc := range []struct {
		mode, extra        string
		workload, capiMgmt bool
	}{
		{mode: "incluster-incluster", workload: true, capiMgmt: true},
		{mode: "incluster-kubeconfig", extra: "clusterAPIKubeconfigSecret: mgmt\n", workload: true},
		{mode: "kubeconfig-incluster", extra: "clusterAPIKubeconfigSecret: workload\n", capiMgmt: true},
		{mode: "kubeconfig-kubeconfig", extra: "clusterAPIKubeconfigSecret: both\n"},
		{mode: "single-kubeconfig", extra: "clusterAPIKubeconfigSecret: one\n"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			in := install(t, "cloudProvider: clusterapi\nclusterAPIMode: "+tc.mode+"\n"+tc.extra)
			ns := in.env.Namespace
			// Wait until the authorizer sees the bindings that are rendered;
			// with none rendered there is nothing to wait for.
			switch {
			case tc.capiMgmt:
				p := capiPermissions("cluster.x-k8s.io")[0]
				in.env.Eventually(10*time.Second, "the RBAC authorizer sees the bindings", func(context.Context) (bool, error) {
					return in.can(t, ns, p), nil
				})
			case tc.workload:
				p := workloadPermissions()[0]
				in.env.Eventually(10*time.Second, "the RBAC authorizer sees the bindings", func(context.Context) (bool, error) {
					return in.can(t, "", p), nil
				})
			}
			for _, p := range capiPermissions("cluster.x-k8s.io") {
				if got := in.can(t, ns, p); got != tc.capiMgmt {
					t.Errorf("%v in %s allowed: %v, want %v", p, ns, got, tc.capiMgmt)
				}
			}
			for _, p := range workloadPermissions() {
				if got := in.can(t, "", p); got != tc.workload {
					t.Errorf("cluster-wide %v allowed: %v, want %v", p, got, tc.workload)
				}
			}
			for _, p := range workloadNamespacePermissions() {
				if got := in.can(t, ns, p); got != tc.workload {
					t.Errorf("%v in %s allowed: %v, want %v", p, ns, got, tc.workload)
				}
			}
			for _, p := range slices.Concat(capiForbidden("cluster.x-k8s.io"), forbiddenPermissions()) {
				if in.can(t, "", p) || in.can(t, ns, p) {
					t.Errorf("%v allowed; the autoscaler does not need it", p)
				}
			}
		})
	}
}

// TestClusterAPIAutoscalerRunsWithTheChartsRBAC installs Cluster API's own
// CRDs and the chart (incluster-incluster, with auto-discovery) on the control
// plane, runs the real binary with the rendered arguments as the chart's
// service account, and sees a pending pod scale an annotated
// MachineDeployment up from zero: the provider's informers and the scale
// subresource work with the rendered RBAC, with no request refused. Then, as
// that service account, it makes the provider's scale-down write (the
// delete-machine merge patch on a Machine) and is refused what the provider
// never does.
func TestClusterAPIAutoscalerRunsWithTheChartsRBAC(t *testing.T) {
	pool := framework.UniqueName("pool")
	in := install(t, fmt.Sprintf(`
cloudProvider: clusterapi
extraArgs:
  v: 2
  address: %q
  explain-address: ""
  scan-interval: 1s
autoDiscovery:
  clusterName: test
  labels: [{chart-test: %s}]
`, framework.FreeAddress(t), pool))
	env, ns := in.env, in.env.Namespace
	ctx := env.Context()
	admin, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := capi.CRDDir(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := capi.InstallCRDs(ctx, admin, dir); err != nil {
		t.Fatal(err)
	}

	mds := admin.Resource(capi.GVR("machinedeployments")).Namespace(ns)
	md := capi.MachineDeployment(ns, "test", "workers", "workers", 0, map[string]string{
		clusterapi.MinSizeAnnotation: "0", clusterapi.MaxSizeAnnotation: "3",
		clusterapi.CPUAnnotation: "4", clusterapi.MemoryAnnotation: "16Gi",
		clusterapi.LabelsAnnotation: "pool=" + pool,
	})
	md.SetLabels(map[string]string{"chart-test": pool})
	if _, err := mds.Create(ctx, md, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One that auto-discovery must leave alone: same cluster, not the label.
	other := capi.MachineDeployment(ns, "test", "not-discovered", "workers", 0, md.GetAnnotations())
	if _, err := mds.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	_, c := in.manifest.deployment(t)
	log := startProcess(t, "cluster-autoscaler", autoscalerBinary, append(c.Args, "--kubeconfig="+impersonatingKubeconfig(t, in))...)

	pod := framework.MakePod(ns, "needs-a-machine").Req("1", "1Gi").NodeSelector("pool", pool).Obj()
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(60*time.Second, "the autoscaler raises the MachineDeployment's replicas to 1 through the scale subresource", func(ctx context.Context) (bool, error) {
		got, err := mds.Get(ctx, "workers", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		return n == 1, nil
	})
	if got, err := mds.Get(ctx, "not-discovered", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); n != 0 {
		t.Errorf("the MachineDeployment without the discovery label was scaled to %d", n)
	}

	// The scale-down write, as the service account: the provider's merge patch.
	machine := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capi.Group + "/" + capi.Version, "kind": "Machine",
		"metadata": map[string]any{"namespace": ns, "name": "workers-a"},
		"spec": map[string]any{
			"clusterName": "test",
			"bootstrap":   map[string]any{"dataSecretName": "none"},
			"infrastructureRef": map[string]any{
				"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TestMachine", "name": "none"},
		},
	}}
	if _, err := admin.Resource(capi.GVR("machines")).Namespace(ns).Create(ctx, machine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa, err := dynamic.NewForConfig(in.impersonated())
	if err != nil {
		t.Fatal(err)
	}
	saMachines := sa.Resource(capi.GVR("machines")).Namespace(ns)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"now"}}}`, clusterapi.DeleteMachineAnnotation)
	if got, err := saMachines.Patch(ctx, "workers-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("marking a Machine for deletion: %v", err)
	} else if _, ok := got.GetAnnotations()[clusterapi.DeleteMachineAnnotation]; !ok {
		t.Errorf("the Machine has no %s annotation after the patch", clusterapi.DeleteMachineAnnotation)
	}
	if err := saMachines.Delete(ctx, "workers-a", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("deleting a Machine: err %v, want Forbidden", err)
	}
	saMD := sa.Resource(capi.GVR("machinedeployments")).Namespace(ns)
	if _, err := saMD.Patch(ctx, "workers", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("patching a MachineDeployment itself (not its scale): err %v, want Forbidden", err)
	}

	for _, line := range strings.Split(log.String(), "\n") {
		if strings.Contains(strings.ToLower(line), "forbidden") {
			t.Errorf("a request was refused: %s", line)
		}
	}
}
