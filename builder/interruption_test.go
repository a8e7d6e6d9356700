package builder

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// offering is a provider offering interruption notices (src may be nil).
type offering struct {
	*fake.Provider
	src cloudprovider.InterruptionSource
}

func (o offering) InterruptionSource() cloudprovider.InterruptionSource { return o.src }

type noNotices struct{}

func (noNotices) PollInterruptions(context.Context) ([]cloudprovider.InterruptionNotice, []cloudprovider.DroppedNotice, error) {
	return nil, nil, nil
}
func (noNotices) AckInterruptions(context.Context, []string) error { return nil }

func TestWithInterruption(t *testing.T) {
	for _, tc := range []struct {
		name     string
		provider cloudprovider.CloudProvider
		readOnly bool
		want     bool
	}{
		{"provider offering notices", offering{fake.NewProvider(), noNotices{}}, false, true},
		{"offering none (no queue)", offering{fake.NewProvider(), nil}, false, false},
		{"provider without the method", fake.NewProvider(), false, false},
		{"read-only loop", offering{fake.NewProvider(), noNotices{}}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := metrics.New(prometheus.NewRegistry())
			given := []disruption.Source{nil}
			in, src := withInterruption(Inputs{Provider: tc.provider, ReadOnly: tc.readOnly, Metrics: m,
				Disruption: DisruptionInputs{Sources: given[:1:1]}})
			if (src != nil) != tc.want {
				t.Fatalf("source %v, want one: %v", src, tc.want)
			}
			wantSources := 1
			if tc.want {
				wantSources = 2
				if in.Disruption.Sources[1] != disruption.Source(src) {
					t.Errorf("the source is not among the engine's sources")
				}
			}
			if len(in.Disruption.Sources) != wantSources {
				t.Errorf("%d sources, want %d", len(in.Disruption.Sources), wantSources)
			}
		})
	}
}
