package lifecycle

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// upstreamFamily is a series family as upstream exports it: its type and
// label names (histograms add le, summaries quantile).
type upstreamFamily struct {
	typ    string
	labels []string
}

// upstreamFamilies are upstream's cluster_autoscaler_* families that a
// scrape after a scale-up and a scale-down of a GPU node group shows (with
// --emit-per-nodegroup-metrics). The families that appear only after their
// own event (failed GPU scale-ups, node auto-provisioning) are checked in
// the metrics package's tests.
var upstreamFamilies = map[string]upstreamFamily{
	"cluster_safe_to_autoscale":            {"gauge", nil},
	"nodes_count":                          {"gauge", []string{"state"}},
	"node_groups_count":                    {"gauge", []string{"node_group_type"}},
	"unschedulable_pods_count":             {"gauge", []string{"type"}},
	"max_nodes_count":                      {"gauge", nil},
	"cluster_cpu_current_cores":            {"gauge", nil},
	"cpu_limits_cores":                     {"gauge", []string{"direction"}},
	"cluster_memory_current_bytes":         {"gauge", nil},
	"memory_limits_bytes":                  {"gauge", []string{"direction"}},
	"node_group_min_count":                 {"gauge", []string{"node_group"}},
	"node_group_max_count":                 {"gauge", []string{"node_group"}},
	"node_group_target_count":              {"gauge", []string{"node_group"}},
	"node_group_healthiness":               {"gauge", []string{"node_group"}},
	"node_group_backoff_status":            {"gauge", []string{"node_group", "reason"}},
	"last_activity":                        {"gauge", []string{"activity"}},
	"function_duration_seconds":            {"histogram", []string{"function"}},
	"function_duration_quantile_seconds":   {"summary", []string{"function"}},
	"pending_node_deletions":               {"gauge", nil},
	"errors_total":                         {"counter", []string{"type"}},
	"scaled_up_nodes_total":                {"counter", []string{"dra_drivers", "gpu_name", "gpu_resource_name"}},
	"scaled_up_gpu_nodes_total":            {"counter", []string{"gpu_name", "gpu_resource_name"}},
	"failed_scale_ups_total":               {"counter", []string{"dra_drivers", "gpu_name", "gpu_resource_name", "reason"}},
	"failed_node_creations_total":          {"counter", []string{"reason"}},
	"scaled_down_nodes_total":              {"counter", []string{"dra_drivers", "gpu_name", "gpu_resource_name", "reason"}},
	"scaled_down_gpu_nodes_total":          {"counter", []string{"gpu_name", "gpu_resource_name", "reason"}},
	"evicted_pods_total":                   {"counter", []string{"eviction_result"}},
	"unneeded_nodes_count":                 {"gauge", nil},
	"unremovable_nodes_count":              {"gauge", []string{"reason"}},
	"scale_down_in_cooldown":               {"gauge", nil},
	"old_unregistered_nodes_removed_count": {"counter", nil},
	"overflowing_controllers_count":        {"gauge", nil},
	"skipped_scale_events_count":           {"counter", []string{"direction", "reason"}},
	"node_taints_count":                    {"gauge", []string{"type"}},
	"binpacking_heterogeneity":             {"histogram", []string{"cpu_count", "instance_type", "namespace_count"}},
	"max_node_skip_eval_duration_seconds":  {"gauge", nil},
	"node_removal_latency_seconds":         {"histogram", []string{"delay_reason", "deleted"}},
}

// scrape is one /metrics body parsed into families: type and label names.
type scrape struct {
	types  map[string]string
	labels map[string]map[string]bool
	body   string
}

var (
	typeLine   = regexp.MustCompile(`^# TYPE (\S+) (\S+)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"`)
)

func parseScrape(body string) scrape {
	s := scrape{types: map[string]string{}, labels: map[string]map[string]bool{}, body: body}
	for _, line := range strings.Split(body, "\n") {
		if m := typeLine.FindStringSubmatch(line); m != nil {
			s.types[m[1]] = m[2]
			s.labels[m[1]] = map[string]bool{}
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		family := m[1]
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base := strings.TrimSuffix(family, suffix); base != family && (s.types[base] == "histogram" || s.types[base] == "summary") {
				family = base
			}
		}
		if s.labels[family] == nil {
			s.labels[family] = map[string]bool{}
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			if p[1] != "le" && p[1] != "quantile" {
				s.labels[family][p[1]] = true
			}
		}
	}
	return s
}

func (s scrape) labelNames(family string) []string {
	var out []string
	for l := range s.labels[family] {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

func gpuGroupConfig(e *framework.Env, gpuGroup, plainGroup string) string {
	return itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 3
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, kwok.x-k8s.io/gpu: nvidia-tesla-t4, node.kubernetes.io/instance-type: gpu-4}
    capacity: {cpu: "4", memory: 16Gi, pods: "110", nvidia.com/gpu: "1"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  minSize: 0
  maxSize: 3
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, gpuGroup, plainGroup, framework.TestNamespaceLabel, e.Namespace))
}

// statusEvents lists the events on the status ConfigMap as "Type Reason Message".
func statusEvents(ctx context.Context, e *framework.Env) ([]string, error) {
	list, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
		"involvedObject.kind": "ConfigMap", "involvedObject.name": "cluster-autoscaler-status"}.String()})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Type+" "+ev.Reason+" "+ev.Message)
	}
	return out, nil
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsAndEventsAsUpstream runs the real binary through a scale-up
// and a scale-down of a GPU node group, scrapes /metrics and checks every
// upstream family's type and label names, upstream's function labels, the
// GPU counters, client-go's and component-base's series, the events on the
// status ConfigMap and the Lease, and that the status ConfigMap's other
// keys survive.
func TestMetricsAndEventsAsUpstream(t *testing.T) {
	e := framework.New(t)
	gpuGroup, plainGroup := framework.UniqueName("gpu"), framework.UniqueName("plain")
	path := gpuGroupConfig(e, gpuGroup, plainGroup)
	itest.DumpPods(e)
	// An operator's own key in the status ConfigMap survives the autoscaler.
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-autoscaler-status", Namespace: e.Namespace},
		Data:       map[string]string{"mine": "keep"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.CreatePods(e, "gpu", 1, "1", map[string]string{"pool": gpuGroup})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleDownArgs(e, path, "--emit-per-nodegroup-metrics",
		"--bypassed-scheduler-names=default-scheduler", "--leader-elect=true", "--leader-elect-lease-duration=6s",
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=500ms")...)

	e.Eventually(60*time.Second, "a GPU node added", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, gpuGroup)) == 1, nil
	})
	upGPU := `cluster_autoscaler_scaled_up_gpu_nodes_total{gpu_name="nvidia-tesla-t4",gpu_resource_name="nvidia.com/gpu"} 1`
	upAll := `cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="nvidia-tesla-t4",gpu_resource_name="nvidia.com/gpu"} 1`
	e.Eventually(30*time.Second, "the GPU scale-up counted", func(ctx context.Context) (bool, error) {
		_, body, err := p.Get(ctx, "/metrics")
		return err == nil && strings.Contains(body, upGPU) && strings.Contains(body, upAll), nil
	})
	if err := e.Client.CoreV1().Pods(e.Namespace).DeleteCollection(e.Context(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(60*time.Second, "the empty GPU node removed", func(context.Context) (bool, error) {
		return len(itest.NodeNames(e, gpuGroup)) == 0, nil
	})
	downGPU := `cluster_autoscaler_scaled_down_gpu_nodes_total{gpu_name="nvidia-tesla-t4",gpu_resource_name="nvidia.com/gpu",reason="empty"} 1`
	var s scrape
	e.Eventually(30*time.Second, "the GPU scale-down counted", func(ctx context.Context) (bool, error) {
		_, body, err := p.Get(ctx, "/metrics")
		s = parseScrape(body)
		return err == nil && strings.Contains(body, downGPU), nil
	})

	for name, want := range upstreamFamilies {
		full := "cluster_autoscaler_" + name
		if got, ok := s.types[full]; !ok {
			t.Errorf("/metrics lacks %s", full)
			continue
		} else if got != want.typ {
			t.Errorf("%s is a %s, want a %s", full, got, want.typ)
		}
		if diff := cmp.Diff(want.labels, s.labelNames(full)); diff != "" {
			t.Errorf("%s label names (-want +got):\n%s", full, diff)
		}
	}
	for _, function := range []string{"main", "loopWait", "cloudProviderRefresh", "updateClusterState", "filterOutSchedulable",
		"scaleUp", "scaleUp:buildPodEquivalenceGroups", "scaleUp:estimate", "findUnneeded", "scaleDown",
		"scaleDown:nodeDeletion", "scaleDown:softTaintUnneeded"} {
		if !strings.Contains(s.body, fmt.Sprintf(`cluster_autoscaler_function_duration_seconds_count{function=%q}`, function)) {
			t.Errorf("function_duration_seconds has no function=%q", function)
		}
	}
	for _, want := range []string{
		`cluster_autoscaler_unschedulable_pods_count{type="scheduler_unprocessed"} 0`,
		`cluster_autoscaler_skipped_scale_events_count{direction="up",reason="CpuResourceLimit"} 0`,
		// Any namespace count: pending pods a test before left behind
		// (their namespace still being deleted) may share the loop.
		`cluster_autoscaler_binpacking_heterogeneity_count{cpu_count="4",instance_type="gpu-4",namespace_count="`,
		`cluster_autoscaler_node_removal_latency_seconds_count{delay_reason="none",deleted="true"}`,
		`cluster_autoscaler_function_duration_seconds_bucket{function="main",le="0.1"}`,
	} {
		if !strings.Contains(s.body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, l := range regexp.MustCompile(`cluster_autoscaler_unremovable_nodes_count\{reason="([^"]*)"\}`).FindAllStringSubmatch(s.body, -1) {
		if !regexp.MustCompile(`^[0-9]+$`).MatchString(l[1]) {
			t.Errorf("unremovable_nodes_count reason %q is not upstream's enum number", l[1])
		}
	}
	// client-go's and component-base's own series, and the Go runtime's.
	for _, family := range []string{"rest_client_requests_total", "rest_client_request_duration_seconds",
		"registered_metrics_total", "go_goroutines", "process_start_time_seconds"} {
		if _, ok := s.types[family]; !ok {
			t.Errorf("/metrics lacks %s", family)
		}
	}

	e.Eventually(30*time.Second, "upstream's events on the status ConfigMap", func(ctx context.Context) (bool, error) {
		events, err := statusEvents(ctx, e)
		return err == nil && containsAll(events,
			fmt.Sprintf("Normal ScaledUpGroup Scale-up: setting group %s size to 1 instead of 0 (max: 3)", gpuGroup),
			fmt.Sprintf("Normal ScaledUpGroup Scale-up: group %s size set to 1 instead of 0 (max: 3)", gpuGroup)) &&
			strings.Contains(strings.Join(events, "\n"), "Normal ScaleDownEmpty Scale-down: empty node "), err
	})
	e.Eventually(30*time.Second, "a LeaderElection event on the Lease", func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.kind": "Lease", "reason": "LeaderElection"}.String()})
		return err == nil && len(list.Items) > 0 && strings.Contains(list.Items[0].Message, "became leader"), err
	})

	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), "cluster-autoscaler-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data["mine"] != "keep" {
		t.Errorf("the status ConfigMap lost the key mine: %v", cm.Data)
	}
	if !strings.HasPrefix(cm.Data[clusterstate.StatusDataKey], "autoscalerStatus: Running\nclusterWide:\n  health:\n") {
		t.Errorf("status is not in upstream's layout:\n%s", cm.Data[clusterstate.StatusDataKey])
	}
	if code := p.Terminate(20 * time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// TestMaxNodesTotalReachedEvent: with --max-nodes-total reached, a pending
// pod gets no node and the status ConfigMap a Warning MaxNodesTotalReached.
func TestMaxNodesTotalReachedEvent(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("capped")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	// One node of the group exists: its pod fits, the other pod waits.
	itest.GroupNode(e, group, group+"-first", nil)
	nodes, _ := itest.ClusterCapacity(e)
	itest.CreatePods(e, "wait", 2, "3", map[string]string{"pool": group})
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, fmt.Sprintf("--max-nodes-total=%d", nodes))...)
	want := fmt.Sprintf("Warning MaxNodesTotalReached Max total nodes in cluster reached: %d", nodes)
	e.Eventually(30*time.Second, "MaxNodesTotalReached on the status ConfigMap", func(ctx context.Context) (bool, error) {
		events, err := statusEvents(ctx, e)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && containsAll(events, want), err
	})
	if got := len(itest.NodeNames(e, group)); got != 1 {
		t.Errorf("the group has %d nodes, want its 1: none added beyond --max-nodes-total", got)
	}
}

// TestFailedToScaleUpGroupEvent: an all-or-nothing increase the cloud refuses
// (out of capacity) records a Warning FailedToScaleUpGroup on the status
// ConfigMap and counts the failed scale-up and its nodes.
func TestFailedToScaleUpGroupEvent(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("refused")
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 3
  options: {zeroOrMaxNodeScaling: true}
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {outOfCapacityAfter: 1}
`, group, framework.TestNamespaceLabel, e.Namespace))
	itest.DumpPods(e)
	itest.CreatePods(e, "refused", 1, "1", map[string]string{"pool": group})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	e.Eventually(30*time.Second, "FailedToScaleUpGroup on the status ConfigMap", func(ctx context.Context) (bool, error) {
		events, err := statusEvents(ctx, e)
		if err != nil {
			return false, err
		}
		for _, ev := range events {
			if strings.HasPrefix(ev, "Warning FailedToScaleUpGroup Scale-up failed for group "+group+": ") {
				return true, nil
			}
		}
		return false, nil
	})
	time.Sleep(3 * time.Second) // more loops: the backed-off group is counted once
	_, body, err := p.Get(e.Context(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`cluster_autoscaler_failed_scale_ups_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="cloudProviderError"} 1`,
		`cluster_autoscaler_failed_node_creations_total{reason="cloudProviderError"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, itest.GrepLines(body, "failed_"))
		}
	}
	if got := len(itest.NodeNames(e, group)); got != 0 {
		t.Errorf("%d nodes added by a refused all-or-nothing increase", got)
	}
}
