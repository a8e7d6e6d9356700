// Package inprocess runs the autoscaler wired by package builder inside a
// test's own process, on a fake clock (test/integration/timers, healing).
// It is apart from itest so that the other integration packages' test
// binaries do not link the builder and the loop (docs/test-times.md).
package inprocess

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/metrics"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// Autoscaler is the autoscaler wired by package builder inside the test's
// own process, on the package's control plane and the kwok provider, with
// a fake clock: a loop runs when the test calls RunOnce, at the clock's
// time, so that checks of timers (unneeded time, delay after a scale-up,
// bookings, expiry) run at upstream's defaults of minutes or days without
// waiting for them. Everything else is real: the API server, the
// scheduler, kwok's kubelets, the informers, the provider and the
// removals (their waits are on the fake clock too: see StepUntil).
type Autoscaler struct {
	Clock    *clocktesting.FakeClock
	Registry *prometheus.Registry
	Loop     *builder.Loop
	// Explainer keeps the last loop's verdicts (as /explainz serves them):
	// a failing test says why with NodeVerdict.
	Explainer *explain.Recorder
	// Provider is the kwok provider the loop scales.
	Provider cloudprovider.CloudProvider
	// Informers are what the loop reads: a test that wrote objects waits
	// for them there before RunOnce.
	Informers *builder.Informers

	e          *framework.Env
	autoscaler *core.Autoscaler
	loopCtx    context.Context
	stack      *builder.Stack
	stop       func()
}

// Stop ends the in-process autoscaler as a process's end would (removals
// in flight stopped and waited for, informers and provider stopped); the
// test's end does it too.
func (p *Autoscaler) Stop() { p.stop() }

// Options are upstream's defaults (config.Defaults) with the kwok
// provider of configPath on e's cluster and namespace, no leader election,
// then edit applied (nil: none). They are validated as the binary's flags
// are.
func Options(e *framework.Env, configPath string, edit func(*config.Options)) config.Options {
	e.T.Helper()
	o := config.Defaults()
	o.Kubeconfig, o.Namespace = e.Kubeconfig, e.Namespace
	o.CloudProvider, o.CloudConfig, o.KwokProviderEnabled = "kwok", configPath, true
	o.LeaderElection.Enabled = false
	if edit != nil {
		edit(&o)
	}
	if err := o.Validate(); err != nil {
		e.T.Fatalf("options: %v", err)
	}
	return o
}

// Start builds the loop as builder.Run does (informers, provider,
// event recorder, builder.NewLoop, the informers synced, stale taints
// cleaned), with clk as every timer's clock, and tears it down when the
// test ends. It runs no loop: the test calls RunOnce.
func Start(e *framework.Env, clk *clocktesting.FakeClock, opts config.Options) *Autoscaler {
	e.T.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	p := &Autoscaler{Clock: clk, Registry: prometheus.NewRegistry(), Explainer: explain.NewRecorder(), e: e,
		stack: &builder.Stack{}}
	p.stop = sync.OnceFunc(func() { cancel(); p.stack.Unwind() })
	e.T.Cleanup(p.stop)
	informerCtx, stopInformers := context.WithCancel(ctx)
	p.stack.Defer(stopInformers)
	restConfig, err := builder.RESTConfig(opts)
	if err != nil {
		e.T.Fatal(err)
	}
	inf := builder.NewInformers(informerCtx, e.Client)
	provider, err := builder.NewProvider(ctx, builder.NewProviderRegistry(), opts, e.Client, inf, false)
	if err != nil {
		e.T.Fatal(err)
	}
	p.stack.Defer(func() { builder.CleanUpProvider(ctx, provider) })
	recorder, shutdownEvents, err := builder.NewEventRecorder(ctx, opts, restConfig, e.Client, false)
	if err != nil {
		e.T.Fatal(err)
	}
	p.stack.Defer(shutdownEvents)
	m := metrics.New(p.Registry)
	p.Loop, p.loopCtx, err = builder.NewLoop(ctx, informerCtx, builder.Inputs{Opts: opts, RESTConfig: restConfig,
		Client: e.Client, Metrics: m, Informers: inf, Provider: provider, Recorder: recorder, Explainer: p.Explainer, Clock: clk}, p.stack)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := builder.SyncRequests(ctx, informerCtx, p.Loop.ProvReqInformer); err != nil {
		e.T.Fatal(err)
	}
	if synced, err := builder.SyncInformers(ctx, informerCtx, p.stack, stopInformers, inf.Factory,
		p.Loop.NamespaceFactory); !synced {
		e.T.Fatalf("informers not synced: %v", err)
	}
	builder.CleanStaleTaints(ctx, inf.Listers.Nodes, provider, p.Loop.Taints, recorder)
	p.autoscaler = core.NewAutoscaler(builder.CoreOptions(opts), inf.Listers, provider, m, p.Loop.Options...)
	p.Informers, p.Provider = inf, provider
	return p
}

// RunOnce runs one loop at the clock's time and fails the test on error.
func (p *Autoscaler) RunOnce() core.Result {
	p.e.T.Helper()
	r, err := p.autoscaler.RunOnce(p.loopCtx, p.Clock.Now())
	if err != nil {
		p.e.T.Fatalf("loop at %v: %v", p.Clock.Now(), err)
	}
	return r
}

// NodeVerdict is the last loop's scale-down verdict on node, printed.
func (p *Autoscaler) NodeVerdict(node string) string {
	v, note, at, ok := p.Explainer.Node(node)
	if !ok {
		return "no verdict on " + node + " in the last loop"
	}
	return fmt.Sprintf("at %v: %+v %s", at, v, note)
}

// CatchUp moves the fake clock to the real time when it is behind: the API
// server stamps what a test creates (a pod's creation time) on the real
// clock, and a pod created after the loop's now is younger than any
// --new-pod-scale-up-delay.
func (p *Autoscaler) CatchUp() {
	if now := time.Now(); now.After(p.Clock.Now()) {
		p.Clock.SetTime(now)
	}
}

// Step moves the fake clock by d (timers due by then fire).
func (p *Autoscaler) Step(d time.Duration) { p.Clock.Step(d) }

// StepUntil moves the fake clock a second at a time, while something
// waits on it, until cond holds; it fails the test when cond does not hold
// within timeout of real time. The removals the loop started wait on the
// clock (the delay after the taint, the drain's grace), so a test steps it
// while they run.
func (p *Autoscaler) StepUntil(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	p.e.T.Helper()
	p.e.Eventually(timeout, what, func(ctx context.Context) (bool, error) {
		if p.Clock.HasWaiters() {
			p.Clock.Step(time.Second)
		}
		return cond(ctx)
	})
}

// Sum is the sum of the counter or gauge series of name in the registry
// whose labels include labels (nil: every series); 0 when none.
func (p *Autoscaler) Sum(name string, labels map[string]string) float64 {
	p.e.T.Helper()
	families, err := p.Registry.Gather()
	if err != nil {
		p.e.T.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range labels {
				match = match && have[k] == v
			}
			if match {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}
