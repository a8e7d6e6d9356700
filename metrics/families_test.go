package metrics

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// family is one line of testdata/upstream_families.txt.
type family struct {
	Name    string
	Type    string
	Labels  []string // sorted
	Buckets []float64
	Preset  []string // label=value lists of the pre-set series, sorted
	status  string
}

func readUpstreamFamilies(t *testing.T) []family {
	t.Helper()
	f, err := os.Open("testdata/upstream_families.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []family
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "|")
		for i := range cols {
			cols[i] = strings.TrimSpace(cols[i])
		}
		if len(cols) != 7 || cols[6] == "" {
			t.Fatalf("line %d: want 7 columns, the last citing upstream's change: %q", n, line)
		}
		fam := family{Name: namespace + "_" + cols[0], Type: cols[1], status: cols[5]}
		var order []string
		if cols[2] != "-" {
			order = strings.Split(cols[2], ",")
			fam.Labels = append([]string(nil), order...)
			sort.Strings(fam.Labels)
		}
		if fam.Buckets, err = parseBuckets(cols[3]); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if cols[4] != "-" {
			for _, series := range strings.Split(cols[4], ";") {
				fam.Preset = append(fam.Preset, presetKey(order, strings.Split(series, ",")))
			}
			sort.Strings(fam.Preset)
		}
		out = append(out, fam)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func presetKey(names, values []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		v := ""
		if i < len(values) {
			v = values[i]
		}
		parts[i] = n + "=" + v
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// parseBuckets turns exp(start,factor,count) and exprange(min,max,count)
// into client_golang's buckets.
func parseBuckets(spec string) ([]float64, error) {
	if spec == "-" {
		return nil, nil
	}
	open, end := strings.Index(spec, "("), strings.LastIndex(spec, ")")
	if open < 0 || end < open {
		return nil, fmt.Errorf("buckets %q", spec)
	}
	args := strings.Split(spec[open+1:end], ",")
	if len(args) != 3 {
		return nil, fmt.Errorf("buckets %q: want 3 arguments", spec)
	}
	a, err1 := strconv.ParseFloat(args[0], 64)
	b, err2 := strconv.ParseFloat(args[1], 64)
	c, err3 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, fmt.Errorf("buckets %q: bad number", spec)
	}
	switch spec[:open] {
	case "exp":
		return prometheus.ExponentialBuckets(a, b, c), nil
	case "exprange":
		return prometheus.ExponentialBucketsRange(a, b, c), nil
	}
	return nil, fmt.Errorf("buckets %q: unknown function", spec)
}

// recordingRegisterer registers on a Registry and remembers the collectors.
type recordingRegisterer struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// touch creates one series of a vector that has none, so that Gather shows
// the family's type, label names and buckets.
func touch(c prometheus.Collector) {
	for n := 0; n <= 8; n++ {
		values := make([]string, n)
		var err error
		switch v := c.(type) {
		case *prometheus.CounterVec:
			_, err = v.GetMetricWithLabelValues(values...)
		case *prometheus.GaugeVec:
			_, err = v.GetMetricWithLabelValues(values...)
		case *prometheus.HistogramVec:
			_, err = v.GetMetricWithLabelValues(values...)
		case *prometheus.SummaryVec:
			_, err = v.GetMetricWithLabelValues(values...)
		default:
			return
		}
		if err == nil {
			return
		}
	}
}

// ours describes the families New registers, as family values; preset
// holds the counters' series present right after New.
func ours(t *testing.T) map[string]family {
	t.Helper()
	rec := &recordingRegisterer{Registry: prometheus.NewRegistry()}
	New(rec)
	preset := map[string][]string{}
	for _, f := range gatherList(t, rec.Registry) {
		if f.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range f.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(parts)
			preset[f.GetName()] = append(preset[f.GetName()], strings.Join(parts, ","))
		}
	}
	for _, c := range rec.collectors {
		touch(c)
	}
	out := map[string]family{}
	for _, f := range gatherList(t, rec.Registry) {
		fam := family{Name: f.GetName(), Type: strings.ToLower(f.GetType().String()), Labels: labelNames(f)}
		if len(fam.Labels) == 0 {
			fam.Labels = nil
		}
		if h := f.GetMetric()[0].GetHistogram(); h != nil {
			for _, b := range h.GetBucket() {
				fam.Buckets = append(fam.Buckets, b.GetUpperBound())
			}
		}
		fam.Preset = preset[fam.Name]
		sort.Strings(fam.Preset)
		out[fam.Name] = fam
	}
	return out
}

func gatherList(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestFamiliesAsUpstream compares every family we share with upstream's
// newest definitions (testdata/upstream_families.txt): name, type, label
// names, buckets, and the counters' series pre-set at start-up. Upstream
// families we do not export must stay absent (the FAQ lists them), and
// every family of ours must be either upstream's or a listed addition.
func TestFamiliesAsUpstream(t *testing.T) {
	have := ours(t)
	listed := map[string]bool{}
	for _, want := range readUpstreamFamilies(t) {
		listed[want.Name] = true
		got, exported := have[want.Name]
		switch want.status {
		case "shared":
			if !exported {
				t.Errorf("%s: listed as shared, not exported", want.Name)
				continue
			}
			if want.Type != "counter" || len(want.Labels) == 0 {
				got.Preset = nil // pre-set: counter vectors' series (a plain counter always has its one)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(family{}), cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".status"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("%s differs from upstream's (-upstream +ours):\n%s", want.Name, diff)
			}
		case "absent":
			if exported {
				t.Errorf("%s: listed as not exported, but exported (move it to shared and update the FAQ)", want.Name)
			}
		case "addition":
			if !exported {
				t.Errorf("%s: listed as our addition, not exported", want.Name)
			}
		case "elsewhere":
		default:
			t.Errorf("%s: unknown status %q", want.Name, want.status)
		}
	}
	for name := range have {
		if !listed[name] {
			t.Errorf("%s: exported but not in testdata/upstream_families.txt (upstream's, or an addition)", name)
		}
	}
}
