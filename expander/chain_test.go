package expander

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func TestNewChainErrors(t *testing.T) {
	_, lister := configMaps(t)
	tests := []struct {
		name    string
		names   []string
		deps    Deps
		wantIs  error
		wantMsg string
	}{
		{name: "no name", wantMsg: "no expander named"},
		{name: "unknown name", names: []string{"cheapest"}, wantMsg: `"cheapest" is not supported`},
		{name: "grpc", names: []string{config.PriorityExpander, config.GRPCExpander},
			deps: Deps{ConfigMaps: lister}, wantIs: ErrGRPCNotWired, wantMsg: "no client constructor"},
		{name: "price without a provider", names: []string{config.PriceExpander}, wantMsg: "needs a cloud provider"},
		{name: "price without pricing", names: []string{config.PriceExpander}, deps: Deps{Provider: newWorld().provider},
			wantIs: cloudprovider.ErrNotImplemented, wantMsg: "pricing model"},
		{name: "priority without a lister", names: []string{config.PriorityExpander}, wantMsg: "needs a ConfigMap lister"},
		{name: "something after random", names: []string{config.RandomExpander, config.MostPodsExpander},
			wantMsg: "nothing may follow"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewChain(t.Context(), tc.names, tc.deps)
			if err == nil {
				t.Fatalf("NewChain(%v) = %v, want an error", tc.names, s)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %q does not wrap %q", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not say %q", err, tc.wantMsg)
			}
		})
	}
}

func TestChain(t *testing.T) {
	w := newWorld().
		group("small", templateNode("small", "2", "8Gi")).
		group("medium", templateNode("medium", "4", "16Gi")).
		group("medium-b", templateNode("medium-b", "4", "16Gi")).
		group("large", templateNode("large", "8", "32Gi")).
		group("no-template", nil)
	w.provider.SetPricing(&fakePricing{nodePerCoreHour: 0.04, podPerCoreHour: 0.04})
	_, lister := configMaps(t, withPriorities("50:\n  - ^medium\n10:\n  - .*\n"))
	// 4 pods of 1 cpu, 4Gi: medium and medium-b waste nothing, large (more pods) and small (more nodes) do.
	options := []optionSpec{
		{group: "small", nodes: 2, pods: pods(4, "1", "4Gi")[:2]},
		{group: "medium", nodes: 1, pods: pods(4, "1", "4Gi")},
		{group: "large", nodes: 1, pods: pods(5, "1", "4Gi")},
		{group: "medium-b", nodes: 1, pods: pods(4, "1", "4Gi")},
	}
	tests := []struct {
		name    string
		names   []string
		options []optionSpec
		random  func(int) int
		want    string
	}{
		{name: "no option", names: []string{config.LeastWasteExpander}, random: last, want: "<nil>"},
		{name: "a single option is kept", names: []string{config.MostPodsExpander}, options: options[:1], want: "small/2"},
		{name: "the first filter runs even on a single option", names: []string{config.LeastWasteExpander},
			options: []optionSpec{{group: "no-template", nodes: 1, pods: pods(1, "1", "1Gi")}}, want: "<nil>"},
		{name: "one filter, one winner", names: []string{config.MostPodsExpander}, options: options, want: "large/1"},
		{name: "the chain stops at the first single winner", // least-waste would drop it
			names:   []string{config.MostPodsExpander, config.LeastWasteExpander},
			options: []optionSpec{options[1], {group: "no-template", nodes: 1, pods: pods(6, "1", "1Gi")}}, want: "no-template/1"},
		{name: "the next filter breaks a tie",
			names: []string{config.LeastNodesExpander, config.MostPodsExpander}, options: options, want: "large/1"},
		{name: "random breaks the remaining tie (first)", names: []string{config.LeastWasteExpander},
			options: options, random: func(int) int { return 0 }, want: "medium/1"},
		{name: "random breaks the remaining tie (last)", names: []string{config.LeastWasteExpander},
			options: options, random: last, want: "medium-b/1"},
		{name: "priority then least-waste", names: []string{config.PriorityExpander, config.LeastWasteExpander},
			options: []optionSpec{options[0], options[1], options[2]}, want: "medium/1"},
		{name: "random at the end of the chain", names: []string{config.LeastNodesExpander, config.RandomExpander},
			options: options, random: last, want: "medium-b/1"},
		{name: "price", names: []string{config.PriceExpander}, options: options[1:3], want: "medium/1"},
		{name: "a filter leaving nothing stops the chain", names: []string{config.LeastWasteExpander, config.MostPodsExpander},
			options: []optionSpec{{group: "no-template", nodes: 1}, {group: "no-template", nodes: 2}}, want: "<nil>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			random := tc.random
			if random == nil {
				random = func(n int) int { t.Fatalf("random choice among %d options", n); return 0 }
			}
			deps := Deps{Provider: w.provider, ConfigMaps: lister, Namespace: testNamespace, Random: random,
				Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))}
			s, err := NewChain(t.Context(), tc.names, deps)
			if err != nil {
				t.Fatal(err)
			}
			if got := id(s.BestOption(t.Context(), w.options(t, tc.options), w.nodeInfos)); got != tc.want {
				t.Errorf("BestOption = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestChainReturnsACopy(t *testing.T) {
	w := newWorld().group("a", nil)
	options := []Option{w.option(t, "a", 1)}
	s, err := NewChain(t.Context(), []string{config.MostPodsExpander}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	best := s.BestOption(t.Context(), options, nil)
	best.NodeCount = 7
	if diff := cmp.Diff([]string{"a/1"}, ids(options)); diff != "" {
		t.Errorf("changing the result changed the input (-want +got):\n%s", diff)
	}
}

// The grpc expander falls back to least-waste when it ends the chain, and
// to the rest of the chain when others follow it.
func TestGRPCFallbackDependsOnItsPlace(t *testing.T) {
	var got []Filter
	deps := Deps{GRPC: func(fallback Filter) (Filter, error) {
		got = append(got, fallback)
		return mostPods{}, nil
	}}
	if _, err := NewChain(context.Background(), []string{config.GRPCExpander}, deps); err != nil {
		t.Fatal(err)
	}
	if _, err := NewChain(context.Background(), []string{config.GRPCExpander, config.MostPodsExpander}, deps); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d grpc expanders built, want 2", len(got))
	}
	if _, ok := got[0].(leastWaste); !ok {
		t.Errorf("alone, grpc falls back to %T, want least-waste", got[0])
	}
	if got[1] != nil {
		t.Errorf("followed by most-pods, grpc falls back to %T, want the rest of the chain", got[1])
	}
}
