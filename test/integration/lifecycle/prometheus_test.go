package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// promJob is the job name the test's Prometheus scrapes the autoscaler as.
const promJob = "cluster-autoscaler"

// prometheusServer is a real Prometheus on loopback.
type prometheusServer struct {
	t       *testing.T
	address string
}

// startPrometheus runs _output/bin/prometheus scraping target every second
// and evaluating rules every second, and waits until it is ready.
func startPrometheus(t *testing.T, target, rules string) *prometheusServer {
	t.Helper()
	bin, err := framework.Tool("prometheus", "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%q]
`, rules, promJob, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &prometheusServer{t: t, address: framework.FreeAddress(t)}
	log := &framework.SyncBuffer{}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.address, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("log of prometheus:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _, err := s.get(context.Background(), "/-/ready", nil); err == nil && code == http.StatusOK {
			return s
		}
		select {
		case <-done:
			t.Fatalf("prometheus exited at start-up:\n%s", log.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s:\n%s", log.String())
		}
	}
}

func (s *prometheusServer) get(ctx context.Context, path string, query url.Values) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := "http://" + s.address + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// api calls one endpoint of the HTTP API and decodes its data into out;
// an error status (a bad query, an unknown function) is an error.
func (s *prometheusServer) api(ctx context.Context, path string, query url.Values, out any) error {
	code, body, err := s.get(ctx, path, query)
	if err != nil {
		return err
	}
	var env struct {
		Status   string          `json:"status"`
		Error    string          `json:"error"`
		Warnings []string        `json:"warnings"`
		Data     json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: HTTP %d: %s", path, code, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s %v: %s", path, query, env.Error)
	}
	if len(env.Warnings) > 0 {
		return fmt.Errorf("%s %v: warnings %v", path, query, env.Warnings)
	}
	return json.Unmarshal(env.Data, out)
}

// series is one series of a range query: its labels and values.
type series struct {
	Metric map[string]string `json:"metric"`
	Values [][2]any          `json:"values"`
}

// queryRange runs expr as Grafana draws a panel: a range query.
func (s *prometheusServer) queryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]series, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []series `json:"result"`
	}
	err := s.api(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {step.String()}}, &data)
	return data.Result, err
}

// instant runs expr at now and returns how many series it gave.
func (s *prometheusServer) instant(ctx context.Context, expr string) (int, error) {
	var data struct {
		Result []json.RawMessage `json:"result"`
	}
	err := s.api(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data)
	return len(data.Result), err
}

// labelNames returns the label names of the series selector matches in [start, end].
func (s *prometheusServer) labelNames(ctx context.Context, selector string, start, end time.Time) ([]string, error) {
	var names []string
	err := s.api(ctx, "/api/v1/labels", url.Values{"match[]": {selector},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)}}, &names)
	return names, err
}

// hasNumber reports whether any sample of any series is a number (not NaN).
func hasNumber(result []series) bool {
	for _, s := range result {
		for _, v := range s.Values {
			str, _ := v[1].(string)
			if f, err := strconv.ParseFloat(str, 64); err == nil && !math.IsNaN(f) {
				return true
			}
		}
	}
	return false
}

var (
	selectorRE = regexp.MustCompile(`cluster_autoscaler_\w+(\{[^}]*\})?`)
	byRE       = regexp.MustCompile(`\bby \(([^)]*)\)`)
	legendRE   = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)
)

// checkSelectors asserts that every cluster_autoscaler_* selector of expr
// matches series in [start, end], and that every label named in by (...)
// and in extra (a legend's labels) is a label of those series.
func checkSelectors(ctx context.Context, t *testing.T, prom *prometheusServer, what, expr string, extra []string, start, end time.Time) {
	t.Helper()
	known := map[string]bool{}
	for _, sel := range selectorRE.FindAllString(expr, -1) {
		names, err := prom.labelNames(ctx, sel, start, end)
		if err != nil {
			t.Errorf("%s: %s: %v", what, sel, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: no series match %s", what, sel)
		}
		for _, n := range names {
			known[n] = true
		}
	}
	var want []string
	for _, m := range byRE.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(m[1], ",") {
			want = append(want, strings.TrimSpace(l))
		}
	}
	for _, l := range append(want, extra...) {
		if !known[l] {
			t.Errorf("%s: label %q is not a label of the series of %s", what, l, expr)
		}
	}
}

// TestDashboardAndAlertsAgainstPrometheus runs the real binary through a
// scale-up (pods, a group out of stock that is backed off, and two
// all-or-nothing ProvisioningRequests) and a scale-down while a real
// Prometheus scrapes it every second with the chart's alert rules loaded,
// then runs every query of the chart's dashboard as Grafana would (a range
// query over the test) and asserts that each returns numbers and that every
// metric and label it names exists; and that every alert rule evaluates
// without error, names existing series, and does not fire.
func TestDashboardAndAlertsAgainstPrometheus(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	dashboard, _, err := framework.ReadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(root, "charts", "cluster-autoscaler", "files", "alerts.yaml")

	up, booked, full := framework.UniqueName("up"), framework.UniqueName("pr"), framework.UniqueName("full")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[3]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, outOfCapacityAfter: 1}
`, up, booked, full, framework.TestNamespaceLabel, e.Namespace))
	ca := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e.Env, path, "--enable-provisioning-requests",
		"--emit-per-nodegroup-metrics")...)
	prom := startPrometheus(t, ca.Address, rulesPath)
	start := time.Now()
	ctx := e.Context()

	promSees := func(timeout time.Duration, expr string) {
		t.Helper()
		e.Eventually(timeout, "Prometheus has "+expr, func(ctx context.Context) (bool, error) {
			n, err := prom.instant(ctx, expr)
			return n > 0, err
		})
	}
	promSees(30*time.Second, fmt.Sprintf(`up{job=%q} == 1`, promJob))

	// Scale-up: three pods of 3 CPUs need three 4-CPU nodes of group up;
	// two more need two nodes of group full, which has stock for one: it is
	// backed off and one pod stays unschedulable.
	rs := itest.ReplicaSet(e.Env, "web", up, 3, "3", false)
	itest.CreatePods(e.Env, "stock", 2, "3", map[string]string{"pool": full})
	e.Eventually(60*time.Second, "three web pods Running", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e.Env, "web")
		return err == nil && running == 3 && len(nodes) == 3, err
	})
	promSees(30*time.Second, fmt.Sprintf(`cluster_autoscaler_node_group_backoff_status{job=%q, node_group=%q, reason="STOCKOUT"} == 1`,
		promJob, full))

	// Two all-or-nothing ProvisioningRequests one after the other, one node
	// of group pr each. The histograms' series are born with the first
	// observation, which rate() cannot see; the second one it can.
	for i, name := range []string{"batch-1", "batch-2"} {
		e.Request(name, provreq.ClassBestEffortAtomicScaleUp, nil, false,
			itest.PodSet{Name: "main", Count: 1, CPU: "3", Selector: map[string]string{"pool": booked}})
		e.Condition(name, provreq.ConditionProvisioned, metav1.ConditionTrue, "", 60*time.Second)
		promSees(30*time.Second, fmt.Sprintf(`cluster_autoscaler_provisioning_request_provisioned_seconds_count{job=%q} >= %d`,
			promJob, i+1))
	}

	// Scale-down, one node at a time for the same reason: the web nodes
	// become empty and go.
	for _, replicas := range []int{2, 1} {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
		if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Patch(ctx, rs.Name, types.MergePatchType, patch,
			metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		e.Eventually(60*time.Second, fmt.Sprintf("%d nodes left in group up", replicas), func(context.Context) (bool, error) {
			return len(itest.NodeNames(e.Env, up)) == replicas, nil
		})
		promSees(30*time.Second, fmt.Sprintf(`cluster_autoscaler_node_removal_latency_seconds_count{job=%q} >= %d`,
			promJob, 3-replicas))
	}
	// A few more scrapes, so that every rate window after the events has two samples.
	time.Sleep(3 * time.Second)
	end := time.Now()
	t.Logf("scenario took %v", end.Sub(start).Round(time.Second))

	// Every query of every panel, as Grafana sends it: the job variable set
	// to this job, $__rate_interval to a window of several scrapes.
	replacer := strings.NewReplacer(`$job`, promJob, `$__rate_interval`, "10s")
	queries := dashboard.Queries()
	if len(queries) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	for _, q := range queries {
		what := fmt.Sprintf("panel %q query %s", q.Panel, q.RefID)
		expr := replacer.Replace(q.Expr)
		if strings.Contains(expr, "$") {
			t.Errorf("%s: a variable the test does not know: %s", what, q.Expr)
			continue
		}
		result, err := prom.queryRange(ctx, expr, start, end, time.Second)
		switch {
		case err != nil:
			t.Errorf("%s: %v", what, err)
		case !hasNumber(result):
			t.Errorf("%s returned no data: %s", what, expr)
		}
		var legend []string
		for _, m := range legendRE.FindAllStringSubmatch(q.Legend, -1) {
			legend = append(legend, m[1])
		}
		checkSelectors(ctx, t, prom, what, expr, legend, start, end)
	}
	// The job variable's own query.
	var jobs []string
	if err := prom.api(ctx, "/api/v1/label/job/values", url.Values{"match[]": {"cluster_autoscaler_last_activity"}}, &jobs); err != nil ||
		!slices.Contains(jobs, promJob) {
		t.Errorf("label_values(cluster_autoscaler_last_activity, job) = %v, %v; want %s among them", jobs, err, promJob)
	}

	// Every alert rule is loaded and evaluates without error, every metric
	// and label it names exists, and none fires in this healthy run.
	raw, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var shipped struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(raw, &shipped); err != nil {
		t.Fatal(err)
	}
	var loaded struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				State     string `json:"state"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := prom.api(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &loaded); err != nil {
		t.Fatal(err)
	}
	health := map[string]string{}
	for _, g := range loaded.Groups {
		for _, r := range g.Rules {
			health[r.Name] = r.Health + " " + r.LastError
			if r.State == "firing" {
				t.Errorf("alert %s fires in a healthy run", r.Name)
			}
		}
	}
	for _, g := range shipped.Groups {
		for _, r := range g.Rules {
			if h := strings.TrimSpace(health[r.Alert]); h != "ok" {
				t.Errorf("alert %s: health %q in Prometheus", r.Alert, h)
			}
			checkSelectors(ctx, t, prom, "alert "+r.Alert, r.Expr, nil, start, end)
		}
	}
	if t.Failed() {
		_, body, _ := ca.Get(ctx, "/metrics")
		t.Logf("the autoscaler's /metrics at the end:\n%s", body)
	}
}
