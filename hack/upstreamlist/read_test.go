package main

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mapTree is a source tree in memory.
type mapTree map[string]string

func (m mapTree) ReadFile(name string) ([]byte, error) {
	s, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("%s: no such file", name)
	}
	return []byte(s), nil
}

func (m mapTree) Files(dir string, recursive bool) ([]string, error) {
	var out []string
	for n := range m {
		rest, ok := strings.CutPrefix(n, dir+"/")
		if ok && strings.HasSuffix(n, ".go") && (recursive || !strings.Contains(rest, "/")) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// fixture has the shapes upstream's code uses: flags with constants of
// another package, the FAQ's table, metric constructors with buckets and
// an InitMetrics with a loop, FunctionLabel constants, events recorded
// directly and through a helper that forwards its reason.
var fixture = mapTree{
	"pkg/config/const.go": `package config
import "time"
const DefaultScanInterval = 10 * time.Second
const DefaultRatio = 0.05
`,
	"pkg/config/flags/flags.go": `package flags
import (
	"time"
	"sigs.k8s.io/cluster-autoscaler/pkg/config"
)
const maxGrace = 600
func (p *F) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&p.a, "scan-interval", config.DefaultScanInterval, "u")
	fs.Float64Var(&p.b, "max-ratio", config.DefaultRatio, "u")
	fs.IntVar(&p.c, "max-graceful-termination-sec", maxGrace, "u")
	fs.BoolVar(&p.d, "new-knob", false, "u")
	fs.StringVar(&p.e, "cloud-provider", cloudBuilder.DefaultCloudProvider(), "u")
	fs.StringVar(&p.f, "unknown-default", somewhere.Value(), "u")
	fs.StringArrayVar(&p.g, "nodes", []string{}, "u")
	fs.StringVar(&p.h, "cluster-name", "", "u")
}
`,
	"pkg/FAQ.md": "| Parameter | Description | Default |\n| --- | --- | --- |\n" +
		"| `cloud-provider` | Cloud provider type. | \"gce\" |\n| `v` | log level | |\n| `scan-interval` | old | 5s |\n",
	"pkg/metrics/metrics.go": `package metrics
type FunctionLabel string
type Reason string
const (
	ns = "cluster_autoscaler"
	ScaleUp FunctionLabel = "scaleUp"
	Skipped FunctionLabel = "scaleUp:skippedNodeGroupsSimulation"
	Timeout Reason = "timeout"
	APIError Reason = "apiCallError"
	notALabel = "x"
)
func newCaMetrics() *caMetrics {
	return &caMetrics{
		failed: k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{Namespace: ns, Name: "failed_scale_ups_total"},
			[]string{"reason", "gpu_name"}),
		duration: k8smetrics.NewHistogramVec(&k8smetrics.HistogramOpts{Namespace: ns, Name: "function_duration_seconds",
			Buckets: k8smetrics.ExponentialBucketsRange(0.1, 1800.0, 150)}, []string{"function"}),
		safe: k8smetrics.NewGauge(&k8smetrics.GaugeOpts{Namespace: ns, Name: "cluster_safe_to_autoscale"}),
	}
}
func (m *caMetrics) InitMetrics() {
	for _, r := range []Reason{Timeout, APIError} {
		m.failed.WithLabelValues(string(r), "").Add(0)
	}
}
`,
	"pkg/core/events.go": `package core
func (a *A) run() {
	a.recorder.Eventf(node, apiv1.EventTypeWarning, "ScaleDownFailed", "m")
	a.LogRecorder.Eventf(apiv1.EventTypeNormal, "ScaledUpGroup", "m")
	a.warn(cm, "PriorityConfigMapInvalid", "m")
	a.recorder.Event(pod, apiv1.EventTypeNormal, "", "m")
	a.recorder.Event(pod, apiv1.EventTypeNormal, computed(), "m")
}
func (a *A) warn(cm *ConfigMap, reason, msg string) {
	a.recorder.Event(cm, apiv1.EventTypeWarning, reason, msg)
}
func (l *LogEventRecorder) Eventf(eventtype, reason, message string, args ...any) {
	l.recorder.Eventf(l.obj, eventtype, reason, message, args...)
}
`,
}

func TestReadFixture(t *testing.T) {
	got, notes, err := Read(fixture, "example/ca", "abc123", "2026-08-21")
	if err != nil {
		t.Fatal(err)
	}
	want := `upstream | example/ca | abc123 | 2026-08-21
flag | cloud-provider | gce
flag | cluster-name | ""
flag | max-graceful-termination-sec | 600
flag | max-ratio | 0.05
flag | new-knob | false
flag | nodes | []
flag | scan-interval | 10s
flag | unknown-default | ?
flag | v | —
metric | cluster_safe_to_autoscale | gauge | - | - | -
metric | failed_scale_ups_total | counter | reason,gpu_name | - | apiCallError,;timeout,
metric | function_duration_seconds | histogram | function | exprange(0.1,1800,150) | -
function | scaleUp
function | scaleUp:skippedNodeGroupsSimulation
# event reason not read: pkg/core/events.go:7 (A.run)
event | -
event | PriorityConfigMapInvalid
event | ScaleDownFailed
event | ScaledUpGroup
`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("generated list (-want +got):\n%s", diff)
	}
	wantNotes := []string{
		"flag --unknown-default (pkg/config/flags/flags.go:13): default not a constant and not in the FAQ",
		"event at pkg/core/events.go:7 (A.run): reason not a constant",
	}
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
}

func TestMergeKeepsTheHandKeptLines(t *testing.T) {
	old := "# header\n" + beginMarker + " old\nflag | a | 1\n" + endMarker + "\nkeep | flag-missing | a | why\n"
	got, err := Merge([]byte(old), []byte("flag | b | 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# header\n" + beginMarker + " by `go run ./hack/upstreamlist`; edit only the lines after the END line\n" +
		"flag | b | 2\n" + endMarker + "\nkeep | flag-missing | a | why\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	again, err := Merge(got, []byte("flag | b | 2\n"))
	if err != nil || string(again) != string(got) {
		t.Errorf("merging the same block again changed the list (err %v):\n%s", err, again)
	}
	if _, err := Merge([]byte(endMarker+"\n"+beginMarker+"\n"), nil); err == nil {
		t.Error("a block whose END comes before BEGIN merged without error")
	}
}
