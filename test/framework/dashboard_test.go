package framework

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	cpfake "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/interruption"
)

// describer registers nothing: it keeps the descriptions of the collectors
// registered with it.
type describer struct{ descs []string }

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.descs = append(d.descs, desc.String())
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

var (
	descRE     = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	metricRE   = regexp.MustCompile(`cluster_autoscaler_\w+`)
	selectorRE = regexp.MustCompile(`cluster_autoscaler_\w+(\{[^}]*\})?`)
	byRE       = regexp.MustCompile(`by \(([^)]*)\)`)
)

// TestOptInDashboardRows: the opt-in rows' queries (which the lifecycle
// test's Prometheus run leaves out: their series exist only while the
// disruption engine acts, or its interrupted reason's source reads a
// queue) name only series the engine or the source registers, group
// only by their labels, filter on the job variable, and are listed in
// FAQ.md, as the other rows' queries are checked by the chart and
// lifecycle tests.
func TestOptInDashboardRows(t *testing.T) {
	d, _, err := ReadDashboard()
	if err != nil {
		t.Fatal(err)
	}
	reg := &describer{}
	disruption.New(disruption.Options{}, fake.NewSimpleClientset(), cpfake.NewProvider(), record.NewFakeRecorder(1), reg)
	interruption.New(nil, cpfake.NewProvider(), reg)
	labels := map[string][]string{}
	for _, desc := range reg.descs {
		if m := descRE.FindStringSubmatch(desc); m != nil {
			labels[m[1]] = strings.FieldsFunc(m[2], func(r rune) bool { return r == ',' || r == ' ' })
		}
	}
	if len(labels["cluster_autoscaler_disruption_decisions_total"]) != 2 || len(labels["cluster_autoscaler_interruption_notices_total"]) != 2 {
		t.Fatalf("the engine's series as described: %v", reg.descs)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	faq, err := os.ReadFile(filepath.Join(root, "FAQ.md"))
	if err != nil {
		t.Fatal(err)
	}
	all, optIn := d.AllQueries(), 0
	for _, q := range all {
		if !strings.HasPrefix(q.Row, OptInRowPrefix) {
			continue
		}
		optIn++
		for _, s := range selectorRE.FindAllStringSubmatch(q.Expr, -1) {
			if !strings.Contains(s[1], `job=~"$job"`) {
				t.Errorf("panel %q: %s does not filter on the job variable", q.Panel, s[0])
			}
		}
		if !strings.Contains(string(faq), "`"+q.Expr+"`") {
			t.Errorf("FAQ.md does not list the query of panel %q: %s", q.Panel, q.Expr)
		}
		var known []string
		for _, m := range metricRE.FindAllString(q.Expr, -1) {
			ls, ok := labels[m]
			if !ok {
				t.Errorf("panel %q: %s is not a series of the disruption engine or its interruption source", q.Panel, m)
			}
			known = append(known, ls...)
		}
		for _, m := range byRE.FindAllStringSubmatch(q.Expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); !contains(known, l) {
					t.Errorf("panel %q: label %q is not a label of the series of %s", q.Panel, l, q.Expr)
				}
			}
		}
	}
	if optIn != 4 || len(d.Queries()) != len(all)-optIn {
		t.Errorf("%d opt-in queries of %d, Queries has %d; want the four of the Disruption rows left out of Queries",
			optIn, len(all), len(d.Queries()))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
