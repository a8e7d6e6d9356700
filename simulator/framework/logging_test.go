package framework

import (
	"context"
	"flag"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"
)

func TestVerbosityCapDropsMessagesAboveTheCap(t *testing.T) {
	var lines []string
	base := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: 9})
	capped := verbosityCap{max: 2}.logger(base).WithValues("plugin", "NodeResourcesFit").WithName("filter")
	capped.V(1).Info("kept at 1")
	capped.V(2).Info("kept at 2")
	capped.V(3).Info("dropped at 3")
	capped.V(7).Info("dropped at 7")
	capped.Error(nil, "errors always pass")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines (V(1), V(2), the error), got %d: %q", len(lines), lines)
	}
	if capped.V(3).Enabled() || !capped.V(2).Enabled() {
		t.Fatalf("Enabled must follow the cap: V(2)=%v V(3)=%v", capped.V(2).Enabled(), capped.V(3).Enabled())
	}
	// The underlying logger's own limit still applies below the cap.
	quiet := funcr.New(func(string, string) { t.Error("a message above the sink's own verbosity was written") },
		funcr.Options{Verbosity: 1})
	verbosityCap{max: 5}.logger(quiet).V(3).Info("hidden by the sink")
}

func TestVerbosityCapWrapsTheContextLoggerOnlyWhenItMatters(t *testing.T) {
	var got int
	base := funcr.New(func(string, string) { got++ }, funcr.Options{Verbosity: 9})
	ctx := klog.NewContext(context.Background(), base)
	// -v=5: levels 1..5 would be written without the cap.
	setKlogVerbosity(t, "5")
	klog.FromContext(verbosityCap{max: 0}.wrap(ctx)).V(4).Info("capped away")
	klog.FromContext(verbosityCap{max: 4}.wrap(ctx)).V(4).Info("kept")
	if got != 1 {
		t.Fatalf("with -v=5: want only the message within the cap, got %d", got)
	}
	// -v=0 hides everything above 0 anyway: the context is left as it is.
	setKlogVerbosity(t, "0")
	if c := (verbosityCap{max: 0}).wrap(ctx); c != ctx {
		t.Fatalf("with -v=0 and cap 0 the context should be returned unchanged")
	}
	var _ logr.Logger = klog.FromContext(ctx)
}

// setKlogVerbosity sets klog's global -v for the test and restores 0 after.
func setKlogVerbosity(t *testing.T, v string) {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", v); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Set("v", "0") })
}
