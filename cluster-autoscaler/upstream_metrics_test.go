package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

const metricNamespace = "cluster_autoscaler_"

// family is a metric family as the list and the comparison see it.
type family struct {
	Type    string
	Labels  []string // sorted
	Buckets []float64
	Preset  []string // pre-set series, each "label=value,..." sorted
}

// upstreamFamily reads a metric line's columns: type, labels (in upstream's
// order), buckets, pre-set series (label values in that order).
func upstreamFamily(cols []string) (family, error) {
	fam := family{Type: cols[0]}
	var order []string
	if cols[1] != "-" {
		order = strings.Split(cols[1], ",")
		fam.Labels = slices.Sorted(slices.Values(order))
	}
	var err error
	if fam.Buckets, err = parseBuckets(cols[2]); err != nil {
		return fam, err
	}
	if cols[3] != "-" {
		for _, series := range strings.Split(cols[3], ";") {
			values := strings.Split(series, ",")
			parts := make([]string, len(order))
			for i, n := range order {
				v := ""
				if i < len(values) {
					v = values[i]
				}
				parts[i] = n + "=" + v
			}
			sort.Strings(parts)
			fam.Preset = append(fam.Preset, strings.Join(parts, ","))
		}
		sort.Strings(fam.Preset)
	}
	return fam, nil
}

// parseBuckets turns exp(start,factor,count), exprange(min,max,count),
// linear(start,width,count) and "default" into client_golang's buckets.
func parseBuckets(spec string) ([]float64, error) {
	switch spec {
	case "-":
		return nil, nil
	case "default":
		return prometheus.DefBuckets, nil
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
	case "linear":
		return prometheus.LinearBuckets(a, b, c), nil
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

func gatherList(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// ourFamilies are the families metrics.New registers, by name without the
// namespace; Preset holds the counters' series present right after New.
func ourFamilies(t *testing.T) map[string]family {
	t.Helper()
	rec := &recordingRegisterer{Registry: prometheus.NewRegistry()}
	metrics.New(rec)
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
		fam := family{Type: strings.ToLower(f.GetType().String())}
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				seen[l.GetName()] = true
			}
		}
		if len(seen) > 0 {
			fam.Labels = slices.Sorted(maps.Keys(seen))
		}
		if h := f.GetMetric()[0].GetHistogram(); h != nil {
			for _, b := range h.GetBucket() {
				fam.Buckets = append(fam.Buckets, b.GetUpperBound())
			}
		}
		fam.Preset = preset[f.GetName()]
		sort.Strings(fam.Preset)
		out[strings.TrimPrefix(f.GetName(), metricNamespace)] = fam
	}
	return out
}

// checkMetrics compares every family metrics.New registers with upstream's
// (name, type, label names, buckets, and the counter vectors' series set at
// start-up). Upstream families we do not export must be kept as missing or
// as registered elsewhere; ours that upstream lacks must be listed as ours.
func checkMetrics(t *testing.T, l *upstreamList) {
	have := ourFamilies(t)
	for _, name := range slices.Sorted(maps.Keys(l.metrics)) {
		want, err := upstreamFamily(l.metrics[name])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got, exported := have[name]
		if _, ok := l.keep["metric-elsewhere"][name]; ok {
			if exported {
				t.Errorf("%s: kept as registered elsewhere, but metrics.New registers it: drop its keep line", name)
			}
			continue
		}
		if _, ok := l.keep["metric-missing"][name]; ok {
			if exported {
				t.Errorf("%s: kept as not exported, but exported: drop its keep line and say so in the FAQ", name)
			}
			continue
		}
		if !exported {
			t.Errorf("%s: upstream's family (%s), not exported", name, strings.Join(l.metrics[name], " | "))
			continue
		}
		if want.Type != "counter" || len(want.Labels) == 0 {
			got.Preset = nil // pre-set: counter vectors' series (a plain counter always has its one)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s differs from upstream's (-upstream +ours):\n%s", name, diff)
		}
	}
	checkOurs(t, l, "metric", "", have, l.metrics)
}
