package chart_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
)

const (
	release   = "rel"
	namespace = "kube-system"
	fullname  = "rel-kwok-cluster-autoscaler"
)

// TestDefaultValues: the default values render upstream's default provider,
// aws (nothing that could create Nodes), named after it; the arguments parse.
func TestDefaultValues(t *testing.T) {
	const fullname = "rel-aws-cluster-autoscaler"
	m := render(t, release, namespace, "")

	wantKinds := []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget", "Role",
		"RoleBinding", "Service", "ServiceAccount"}
	if diff := cmp.Diff(wantKinds, m.kinds()); diff != "" {
		t.Fatalf("rendered kinds (-want +got):\n%s", diff)
	}
	for _, o := range m {
		if o.GetName() != fullname {
			t.Errorf("%s is named %q, want %q", o.GetKind(), o.GetName(), fullname)
		}
		clusterScoped := o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding"
		if ns := o.GetNamespace(); (ns == "") != clusterScoped || (!clusterScoped && ns != namespace) {
			t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), ns)
		}
	}

	d, c := m.deployment(t)
	wantArgs := []string{"--cloud-provider=aws", "--namespace=kube-system", "--logtostderr=true",
		"--stderrthreshold=info", "--v=4"}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	checkArgsParse(t, c.Args)
	if diff := cmp.Diff([]apiv1.ContainerPort{{Name: "http", ContainerPort: 8085, Protocol: apiv1.ProtocolTCP}}, c.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	wantProbe := &apiv1.Probe{ProbeHandler: apiv1.ProbeHandler{HTTPGet: &apiv1.HTTPGetAction{
		Path: "/health-check", Port: intstr.FromInt32(8085)}}}
	if diff := cmp.Diff(wantProbe, c.LivenessProbe); diff != "" {
		t.Errorf("liveness probe (-want +got):\n%s", diff)
	}
	spec := d.Spec.Template.Spec
	if spec.PriorityClassName != "system-cluster-critical" || spec.ServiceAccountName != fullname ||
		*d.Spec.Replicas != 1 || spec.DNSPolicy != apiv1.DNSClusterFirst {
		t.Errorf("pod spec: priorityClassName %q, serviceAccountName %q, replicas %d, dnsPolicy %q",
			spec.PriorityClassName, spec.ServiceAccountName, *d.Spec.Replicas, spec.DNSPolicy)
	}
	if c.Image != "cluster-autoscaler:v0.1.0-dev" {
		t.Errorf("image %q", c.Image)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container security context %+v: want a read-only root filesystem", sc)
	}
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels); diff != "" {
		t.Errorf("pod labels do not match the selector (-selector +labels):\n%s", diff)
	}

	svc := &apiv1.Service{}
	m.one(t, "Service", svc)
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, svc.Spec.Selector); diff != "" {
		t.Errorf("service selector (-deployment +service):\n%s", diff)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8085 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service ports %+v", svc.Spec.Ports)
	}
	pdb := &policyv1.PodDisruptionBudget{}
	m.one(t, "PodDisruptionBudget", pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("pdb spec %+v", pdb.Spec)
	}

	if cms := m.all("ConfigMap"); len(cms) != 0 {
		t.Errorf("rendered %d ConfigMaps, want none (no kwok-provider-config)", len(cms))
	}
	cluster, ns := m.rbac(t)
	for _, p := range workloadPermissions() {
		if !allows(cluster, p) {
			t.Errorf("ClusterRole does not grant %v", p)
		}
	}
	for _, p := range workloadNamespacePermissions() {
		if !allows(ns, p) {
			t.Errorf("Role does not grant %v", p)
		}
	}
	for _, p := range append(forbiddenPermissions(), permission{resource: "nodes", verb: "create"}) {
		if allows(cluster, p) || allows(ns, p) {
			t.Errorf("%v is granted; the aws provider does not need it", p)
		}
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		b := &rbacv1.RoleBinding{} // the two share a shape
		m.one(t, kind, b)
		wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: fullname, Namespace: namespace}}
		if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" || b.RoleRef.Name != fullname {
			t.Errorf("%s: roleRef %+v, subjects (-want +got):\n%s", kind, b.RoleRef, diff)
		}
	}
}

// checkRules asserts that the rendered rules grant every permission the
// autoscaler uses and none of the forbidden ones.
func checkRules(t *testing.T, cluster, namespaced []rbacv1.PolicyRule, statusConfigMap, lease string) {
	t.Helper()
	for _, p := range clusterPermissions() {
		if !allows(cluster, p) {
			t.Errorf("ClusterRole does not grant %v", p)
		}
	}
	for _, p := range namespacePermissions(statusConfigMap, lease) {
		if !allows(namespaced, p) {
			t.Errorf("Role does not grant %v", p)
		}
	}
	for _, p := range forbiddenPermissions() {
		if allows(cluster, p) || allows(namespaced, p) {
			t.Errorf("%v is granted; the autoscaler does not need it", p)
		}
	}
}

// checkArgsParse runs the real binary with args and --version: it exits 0 only
// when every flag parses and validates.
func checkArgsParse(t *testing.T, args []string) {
	t.Helper()
	out, err := exec.Command(autoscalerBinary, append(args, "--version")...).CombinedOutput()
	if err != nil {
		t.Errorf("cluster-autoscaler rejects the rendered args %q: %v\n%s", args, err, out)
	}
}

func TestExtraArgsAndNodeGroups(t *testing.T) {
	m := render(t, release, namespace, `
cloudProvider: kwok
autoscalingGroups:
- {name: general, minSize: 0, maxSize: 20}
- {name: large, minSize: 1, maxSize: 1000000}
extraArgs:
  v: 2
  balancing-ignore-label_1: topology.kubernetes.io/zone
  balancing-ignore-label_2: example.com/rack
  max-nodes-total: 1000000
  scale-down-utilization-threshold: 0.65
  scale-down-enabled: false
  leader-elect: null
  expander: priority,least-waste
  address: ":9090"
  status-config-map-name: my-status
  leader-elect-resource-name: my-lease
customArgs: ["--scan-interval=5s"]
`)
	_, c := m.deployment(t)
	wantArgs := []string{
		"--cloud-provider=kwok", "--namespace=kube-system",
		"--nodes=0:20:general", "--nodes=1:1000000:large",
		// extraArgs (merged with the defaults) in key order, cut at the first "_"
		"--address=:9090",
		"--balancing-ignore-label=topology.kubernetes.io/zone", "--balancing-ignore-label=example.com/rack",
		"--expander=priority,least-waste",
		"--leader-elect",
		"--leader-elect-resource-name=my-lease",
		"--logtostderr=true",
		"--max-nodes-total=1000000",
		"--scale-down-enabled=false",
		"--scale-down-utilization-threshold=0.65",
		"--status-config-map-name=my-status",
		"--stderrthreshold=info",
		"--v=2",
		"--scan-interval=5s",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	checkArgsParse(t, c.Args)
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 9090 || c.LivenessProbe.HTTPGet.Port.IntValue() != 9090 {
		t.Errorf("--address :9090: ports %+v, probe %+v", c.Ports, c.LivenessProbe.HTTPGet)
	}
	// The Role follows the renamed status ConfigMap and Lease.
	cluster, ns := m.rbac(t)
	checkRules(t, cluster, ns, "my-status", "my-lease")
	for _, old := range []permission{
		{resource: "configmaps", verb: "update", name: "cluster-autoscaler-status"},
		{group: "coordination.k8s.io", resource: "leases", verb: "update", name: "cluster-autoscaler"},
	} {
		if allows(ns, old) {
			t.Errorf("Role still grants %v after the rename", old)
		}
	}
	// expander names priority, but no expanderPriorities: no ConfigMap.
	if cms := m.all("ConfigMap"); len(cms) != 0 {
		t.Errorf("rendered %d ConfigMaps, want none", len(cms))
	}
}

func TestServiceMonitorAndPrometheusRule(t *testing.T) {
	m := render(t, release, namespace, `
serviceMonitor:
  enabled: true
  interval: 30s
prometheusRule:
  enabled: true
  additionalLabels: {team: platform}
  rules:
  - alert: ClusterAutoscalerNotRunning
    expr: time() - cluster_autoscaler_last_activity{activity="main"} > 600
    for: 5m
`)
	svc := &apiv1.Service{}
	m.one(t, "Service", svc)
	sms := m.all("ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("want one ServiceMonitor, got kinds %v", m.kinds())
	}
	sm := sms[0].Object
	if sms[0].GetAPIVersion() != "monitoring.coreos.com/v1" || sms[0].GetNamespace() != "monitoring" ||
		sms[0].GetLabels()["release"] != "prometheus-operator" {
		t.Errorf("ServiceMonitor %s in %q, labels %v", sms[0].GetAPIVersion(), sms[0].GetNamespace(), sms[0].GetLabels())
	}
	spec := sm["spec"].(map[string]any)
	selector := spec["selector"].(map[string]any)["matchLabels"].(map[string]any)
	for k, v := range selector {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%v, the Service has %q", k, v, svc.Labels[k])
		}
	}
	want := []any{map[string]any{"port": svc.Spec.Ports[0].Name, "path": "/metrics", "interval": "30s"}}
	if diff := cmp.Diff(want, spec["endpoints"]); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{namespace}, spec["namespaceSelector"].(map[string]any)["matchNames"]); diff != "" {
		t.Errorf("namespaceSelector (-want +got):\n%s", diff)
	}

	prs := m.all("PrometheusRule")
	if len(prs) != 1 || prs[0].GetLabels()["team"] != "platform" {
		t.Fatalf("PrometheusRules %v", prs)
	}
	groups := prs[0].Object["spec"].(map[string]any)["groups"].([]any)
	rules := groups[0].(map[string]any)["rules"].([]any)
	if len(groups) != 1 || len(rules) != 1 || rules[0].(map[string]any)["alert"] != "ClusterAutoscalerNotRunning" {
		t.Errorf("PrometheusRule groups %v", groups)
	}

	if _, err := helmTemplate(t, release, namespace, "serviceMonitor: {enabled: true}\nservice: {create: false}\n"); err == nil ||
		!strings.Contains(err.Error(), "serviceMonitor.enabled needs service.create") {
		t.Errorf("ServiceMonitor without Service: err %v", err)
	}
}

func TestRBACDisabled(t *testing.T) {
	m := render(t, release, namespace, `
rbac:
  create: false
  serviceAccount: {name: provided-by-admin}
`)
	wantKinds := []string{"Deployment", "PodDisruptionBudget", "Service"}
	if diff := cmp.Diff(wantKinds, m.kinds()); diff != "" {
		t.Errorf("rendered kinds (-want +got):\n%s", diff)
	}
	d, _ := m.deployment(t)
	if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "provided-by-admin" {
		t.Errorf("serviceAccountName %q", sa)
	}
}

func TestAdditionalRules(t *testing.T) {
	m := render(t, release, namespace, `
rbac:
  additionalRules:
  - apiGroups: [example.com]
    resources: [widgets]
    verbs: [get]
`)
	cluster, _ := m.rbac(t)
	if !allows(cluster, permission{group: "example.com", resource: "widgets", verb: "get"}) {
		t.Errorf("additionalRules missing from the ClusterRole: %+v", cluster)
	}
}

func TestKwokProviderConfigMap(t *testing.T) {
	values := `
cloudProvider: kwok
kwokProviderConfig:
  nodeGroups:
  - name: general
    minSize: 0
    maxSize: 20
    pricePerHour: 0.2
    template:
      labels: {pool: general}
      capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`
	m := render(t, release, namespace, values)
	cm := &apiv1.ConfigMap{}
	m.one(t, "ConfigMap", cm)
	if cm.Name != kwok.ConfigMapName || cm.Namespace != namespace {
		t.Errorf("ConfigMap %s/%s, want %s/%s", cm.Namespace, cm.Name, namespace, kwok.ConfigMapName)
	}
	cfg, err := kwok.ParseConfig([]byte(cm.Data["config"]))
	if err != nil {
		t.Fatalf("the provider rejects the rendered config: %v\n%s", err, cm.Data["config"])
	}
	if len(cfg.NodeGroups) != 1 || cfg.NodeGroups[0].Name != "general" || cfg.NodeGroups[0].MaxSize != 20 {
		t.Errorf("parsed config %+v", cfg.NodeGroups)
	}
	d, _ := m.deployment(t)
	sum := d.Spec.Template.Annotations["checksum/kwok-provider-config"]
	if sum == "" {
		t.Errorf("no checksum annotation: pods would not restart on a config change")
	}
	d2, _ := render(t, release, namespace, strings.Replace(values, "maxSize: 20", "maxSize: 30", 1)).deployment(t)
	if d2.Spec.Template.Annotations["checksum/kwok-provider-config"] == sum {
		t.Errorf("checksum did not change with the config")
	}

	// A string is taken verbatim.
	m = render(t, release, namespace, "cloudProvider: kwok\nkwokProviderConfig: |\n  nodeGroups: []\n")
	m.one(t, "ConfigMap", cm)
	if cm.Data["config"] != "nodeGroups: []\n" {
		t.Errorf("config %q", cm.Data["config"])
	}
}

func TestPriorityExpanderConfigMap(t *testing.T) {
	m := render(t, release, namespace, `
extraArgs: {expander: "priority,random"}
expanderPriorities:
  10: [".*"]
  50: ["^large-.*"]
`)
	cm := &apiv1.ConfigMap{}
	m.one(t, "ConfigMap", cm)
	if cm.Name != "cluster-autoscaler-priority-expander" || cm.Namespace != namespace {
		t.Errorf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	}
	var got map[int][]string
	if err := yaml.UnmarshalStrict([]byte(cm.Data["priorities"]), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int][]string{10: {".*"}, 50: {"^large-.*"}}, got); diff != "" {
		t.Errorf("priorities (-want +got):\n%s", diff)
	}

	// Without the priority expander the ConfigMap is not rendered.
	m = render(t, release, namespace, "expanderPriorities: {10: [\".*\"]}\n")
	if cms := m.all("ConfigMap"); len(cms) != 0 {
		t.Errorf("rendered %d ConfigMaps without --expander=priority", len(cms))
	}
}

func TestUnsupportedValuesFail(t *testing.T) {
	for name, tc := range map[string]struct{ values, want string }{
		"auto-discovery": {"cloudProvider: kwok\nautoDiscovery: {clusterName: prod}\n", "autoDiscovery.clusterName and autoDiscovery.namespace are used only with cloudProvider clusterapi"},
		"auto-discovery with externalgrpc": {"cloudProvider: externalgrpc\nexternalGRPC: {address: \"127.0.0.1:8086\"}\nautoDiscovery: {labels: [{a: b}]}\n",
			"autoDiscovery is used only with cloudProvider clusterapi, kwok and aws"},
		"both pdb bounds":  {"podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}\n", "either minAvailable or maxUnavailable"},
		"incomplete group": {"autoscalingGroups: [{name: a, maxSize: 3}]\n", "needs name, minSize and maxSize"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := helmTemplate(t, release, namespace, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Upstream's default autoDiscovery (tags and roles, no cluster name) is not auto-discovery.
	render(t, release, namespace, "autoDiscovery: {tags: [a, b], roles: [worker]}\n")
}

func TestHelmLint(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", filepath.Join(repoRoot, chartDir)).CombinedOutput(); err != nil {
		t.Errorf("helm lint --strict: %v\n%s", err, out)
	}
}

func TestExtraObjects(t *testing.T) {
	m := render(t, release, namespace, `
cloudProvider: kwok
extraObjects:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: '{{ .Release.Name }}-extra'
  data: {k: v}
- |
  apiVersion: v1
  kind: Secret
  metadata:
    name: {{ include "cluster-autoscaler.fullname" . }}-credentials
  stringData: {token: x}
`)
	cm, secret := &apiv1.ConfigMap{}, &apiv1.Secret{}
	m.one(t, "ConfigMap", cm)
	m.one(t, "Secret", secret)
	if cm.Name != release+"-extra" || secret.Name != fullname+"-credentials" {
		t.Errorf("extra objects named %q and %q", cm.Name, secret.Name)
	}
}

// With the kwok provider, autoDiscovery.labels render one
// --node-group-auto-discovery spec that the provider parses and applies:
// every listed label must be on a group's template.
func TestKwokAutoDiscovery(t *testing.T) {
	m := render(t, release, namespace, "cloudProvider: kwok\nautoDiscovery:\n  labels:\n  - team: a\n  - tier: 1\n")
	_, c := m.deployment(t)
	var specs []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--node-group-auto-discovery="); ok {
			specs = append(specs, v)
		}
	}
	if diff := cmp.Diff([]string{"kwok:team=a,tier=1"}, specs); diff != "" {
		t.Fatalf("auto-discovery args (-want +got):\n%s", diff)
	}
	checkArgsParse(t, c.Args)
	cfg := &kwok.Config{NodeGroups: []kwok.NodeGroupConfig{
		{Name: "both", Template: kwok.TemplateConfig{Labels: map[string]string{"team": "a", "tier": "1"}}},
		{Name: "team-only", Template: kwok.TemplateConfig{Labels: map[string]string{"team": "a"}}},
	}}
	if err := cfg.FilterByDiscovery(specs); err != nil {
		t.Fatalf("the provider rejects the rendered spec: %v", err)
	}
	if len(cfg.NodeGroups) != 1 || cfg.NodeGroups[0].Name != "both" {
		t.Errorf("groups kept: %+v, want only the one with both labels", cfg.NodeGroups)
	}
	// Upstream's default (tags and roles only) renders nothing.
	_, c = render(t, release, namespace, "cloudProvider: kwok\nautoDiscovery: {tags: [a], roles: [worker]}\n").deployment(t)
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--node-group-auto-discovery") {
			t.Errorf("tags and roles rendered %s", a)
		}
	}
}
