package chart_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

const (
	alertsFile     = chartDir + "/files/alerts.yaml"
	alertTestsFile = "testdata/alerts_test.yaml"
)

// ruleFile is a Prometheus rule file (and a PrometheusRule's spec).
type ruleFile struct {
	Groups []struct {
		Name  string           `json:"name"`
		Rules []map[string]any `json:"rules"`
	} `json:"groups"`
}

func alertNames(t *testing.T, f ruleFile) []string {
	t.Helper()
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			if name == "" {
				t.Fatalf("group %s has a rule that is not an alert: %v", g.Name, r)
			}
			out = append(out, name)
		}
	}
	return out
}

func readRuleFile(t *testing.T, path string) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(raw, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

func promtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	bin, err := framework.Tool("prometheus", "promtool")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestShippedAlertsPassPromtool: the shipped rule file and the group the
// chart renders from it pass promtool check rules, and the unit tests of
// testdata/alerts_test.yaml pass promtool test rules against the rendered
// group.
func TestShippedAlertsPassPromtool(t *testing.T) {
	promtool(t, repoRoot, "check", "rules", alertsFile)

	m := render(t, release, namespace, "prometheusAlerts: {enabled: true}\n")
	prs := m.all("PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("want one PrometheusRule, got kinds %v", m.kinds())
	}
	spec, err := yaml.Marshal(prs[0].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alerts.yaml"), spec, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	out := promtool(t, dir, "check", "rules", "alerts.yaml")
	shipped := alertNames(t, readRuleFile(t, filepath.Join(repoRoot, alertsFile)))
	if want := len(shipped); !strings.Contains(out, "SUCCESS: "+strconv.Itoa(want)+" rules found") {
		t.Errorf("promtool check rules of the rendered group: want %d rules, got:\n%s", want, out)
	}
	out = promtool(t, dir, "test", "rules", "alerts_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool test rules:\n%s", out)
	}
}

// alertTests is the part of a promtool unit test file this test reads.
type alertTests struct {
	Tests []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			EvalTime  string           `json:"eval_time"`
			AlertName string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestShippedAlertsFireAndResolve: for every shipped alert, some unit test
// of testdata/alerts_test.yaml expects it not firing, then firing, then
// resolved again later in the same series; and FAQ.md has its runbook line.
func TestShippedAlertsFireAndResolve(t *testing.T) {
	shipped := alertNames(t, readRuleFile(t, filepath.Join(repoRoot, alertsFile)))
	raw, err := os.ReadFile(alertTestsFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests alertTests
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, tc := range tests.Tests {
		// Per alert, the evaluations of this test case in time order.
		type eval struct {
			at     time.Duration
			firing bool
		}
		evals := map[string][]eval{}
		for _, a := range tc.AlertRuleTest {
			at, err := time.ParseDuration(a.EvalTime)
			if err != nil {
				t.Fatalf("test %q: eval_time %q: %v", tc.Name, a.EvalTime, err)
			}
			if !slices.Contains(shipped, a.AlertName) {
				t.Errorf("test %q tests %s, which is not shipped", tc.Name, a.AlertName)
			}
			evals[a.AlertName] = append(evals[a.AlertName], eval{at, len(a.ExpAlerts) > 0})
		}
		for name, es := range evals {
			slices.SortFunc(es, func(a, b eval) int { return int(a.at - b.at) })
			quiet, fired := false, false
			for _, e := range es {
				switch {
				case !e.firing && !fired:
					quiet = true
				case e.firing && quiet:
					fired = true
				case !e.firing && fired:
					covered[name] = true
				}
			}
		}
	}
	faq, err := os.ReadFile(filepath.Join(repoRoot, "FAQ.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range shipped {
		if !covered[name] {
			t.Errorf("no unit test of %s expects it quiet, then firing, then resolved", name)
		}
		if !regexp.MustCompile(`(?m)^\| ` + "`" + name + "`" + ` \|.+\|.+\|$`).Match(faq) {
			t.Errorf("FAQ.md has no runbook row for %s", name)
		}
	}
}

// TestPrometheusAlertsValues: the shipped group is off by default, renders
// the PrometheusRule on its own or beside prometheusRule.rules, leaves out
// the disabled alerts, adds the labels, and refuses names it does not ship.
func TestPrometheusAlertsValues(t *testing.T) {
	if prs := render(t, release, namespace, "").all("PrometheusRule"); len(prs) != 0 {
		t.Errorf("a PrometheusRule is rendered by default")
	}
	shipped := alertNames(t, readRuleFile(t, filepath.Join(repoRoot, alertsFile)))

	groupsOf := func(values string) ruleFile {
		t.Helper()
		prs := render(t, release, namespace, values).all("PrometheusRule")
		if len(prs) != 1 {
			t.Fatalf("want one PrometheusRule, got %d", len(prs))
		}
		raw, err := yaml.Marshal(prs[0].Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		var f ruleFile
		if err := yaml.UnmarshalStrict(raw, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}

	alone := groupsOf("prometheusAlerts: {enabled: true}\n")
	if len(alone.Groups) != 1 || alone.Groups[0].Name != release+"-aws-cluster-autoscaler-alerts" {
		t.Fatalf("groups with only the shipped alerts: %+v", alone.Groups)
	}
	if diff := cmp.Diff(shipped, alertNames(t, alone)); diff != "" {
		t.Errorf("rendered alerts (-shipped +rendered):\n%s", diff)
	}

	both := groupsOf(`
prometheusRule:
  enabled: true
  rules: [{alert: Mine, expr: vector(1)}]
prometheusAlerts:
  enabled: true
  disabled: [ClusterAutoscalerDown, ClusterAutoscalerScaleUpFailures]
  labels: {team: platform, severity: page}
`)
	if len(both.Groups) != 2 || alertNames(t, ruleFile{Groups: both.Groups[:1]})[0] != "Mine" {
		t.Fatalf("groups: %+v", both.Groups)
	}
	want := slices.DeleteFunc(slices.Clone(shipped), func(n string) bool {
		return n == "ClusterAutoscalerDown" || n == "ClusterAutoscalerScaleUpFailures"
	})
	kept := both.Groups[1].Rules
	if diff := cmp.Diff(want, alertNames(t, ruleFile{Groups: both.Groups[1:]})); diff != "" {
		t.Errorf("alerts left after disabled (-want +got):\n%s", diff)
	}
	for _, r := range kept {
		labels, _ := r["labels"].(map[string]any)
		if labels["team"] != "platform" || labels["severity"] != "page" {
			t.Errorf("%s: labels %v, want team=platform and severity=page", r["alert"], labels)
		}
	}

	for values, want := range map[string]string{
		"prometheusAlerts: {enabled: true, disabled: [ClusterAutoscalerTypo]}\n": "prometheusAlerts.disabled: ClusterAutoscalerTypo is not a shipped alert; they are ClusterAutoscalerDown,",
		"prometheusAlerts: {enabled: true, disabled: ClusterAutoscalerDown}\n":   "prometheusAlerts.disabled must be a list of alert names",
		"prometheusAlerts: {enabled: true, labels: [team]}\n":                    "prometheusAlerts.labels must be a map of labels",
		"prometheusAlerts: {enabled: true, labels: {tier: 1}}\n":                 "prometheusAlerts.labels.tier must be a string (quote it), not 1",
	} {
		if _, err := helmTemplate(t, release, namespace, values); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %q: err %v, want %q", values, err, want)
		}
	}
}

// TestGrafanaDashboardConfigMap: the dashboard is off by default; on, it is
// one ConfigMap with the sidecar's label holding files/dashboard.json as is.
// Every panel has queries, every query filters on the dashboard's job
// variable, and FAQ.md lists every query.
func TestGrafanaDashboardConfigMap(t *testing.T) {
	for _, cm := range render(t, release, namespace, "").all("ConfigMap") {
		if strings.HasSuffix(cm.GetName(), "-dashboard") {
			t.Errorf("a dashboard ConfigMap %s is rendered by default", cm.GetName())
		}
	}
	m := render(t, release, namespace, `
grafanaDashboard:
  enabled: true
  namespace: grafana
  annotations: {grafana_folder: Kubernetes}
`)
	cm := &apiv1.ConfigMap{}
	m.one(t, "ConfigMap", cm)
	if cm.Name != release+"-aws-cluster-autoscaler-dashboard" || cm.Namespace != "grafana" ||
		cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Kubernetes" {
		t.Errorf("ConfigMap %s/%s labels %v annotations %v", cm.Namespace, cm.Name, cm.Labels, cm.Annotations)
	}
	d, raw, err := framework.ReadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["cluster-autoscaler.json"]; got != string(bytes.TrimRight(raw, "\n")) {
		t.Errorf("the ConfigMap's dashboard differs from %s", framework.DashboardPath)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q", d.UID, d.Title)
	}

	ids := map[int]bool{}
	for _, p := range d.AllPanels() {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	faq, err := os.ReadFile(filepath.Join(repoRoot, "FAQ.md"))
	if err != nil {
		t.Fatal(err)
	}
	selector := regexp.MustCompile(`cluster_autoscaler_\w+(\{[^}]*\})?`)
	for _, q := range d.Queries() {
		if q.Expr == "" || q.RefID == "" {
			t.Errorf("panel %q: query %q with refId %q", q.Panel, q.Expr, q.RefID)
			continue
		}
		for _, s := range selector.FindAllStringSubmatch(q.Expr, -1) {
			if !strings.Contains(s[1], `job=~"$job"`) {
				t.Errorf("panel %q: %s does not filter on the job variable", q.Panel, s[0])
			}
		}
		if !bytes.Contains(faq, []byte("`"+q.Expr+"`")) {
			t.Errorf("FAQ.md does not list the query of panel %q: %s", q.Panel, q.Expr)
		}
	}

	for values, want := range map[string]string{
		"grafanaDashboard: {enabled: true, labels: null}\n":   "grafanaDashboard.labels is empty",
		"grafanaDashboard: {enabled: true, labels: [a, b]}\n": "grafanaDashboard.labels must be a map",
	} {
		if _, err := helmTemplate(t, release, namespace, values); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("values %q: err %v, want %q", values, err, want)
		}
	}
}
