package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata" // the scratch image has no zoneinfo

	"github.com/spf13/pflag"
	// The image is scratch-based: CA roots are compiled in, used only where
	// the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/heapgovernor"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "v0.1.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args and runs the autoscaler until a signal arrives. It returns
// the process exit code: 0 after a clean stop, 1 when the autoscaler failed or
// lost its lease, 2 for invalid flags.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "explain" {
		return runExplainCommand(args[1:], stdout, stderr)
	}
	cl := newCommandLine()
	cl.fs.SetOutput(stderr)
	if err := cl.parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler: invalid flags:\n%v\n", err)
		return 2
	}
	if cl.version {
		_, _ = fmt.Fprintf(stdout, "cluster-autoscaler %s\n", version)
		return 0
	}
	if err := cl.applyLogging(); err != nil {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler: invalid flags:\n%v\n", err)
		return 2
	}
	defer klog.Flush()
	logger := klog.Background()
	logger.Info("Starting cluster-autoscaler", "version", version)
	for _, w := range cl.opts.Warnings() {
		logger.Info("Warning: odd flag value, accepted as upstream accepts it", "problem", w)
	}
	notYet, otherProviders, removed := cl.notices()
	if len(notYet) > 0 {
		logger.Info("Flags accepted without effect in this version (not yet implemented, or no such knob in this design; see the FAQ)", "flags", notYet)
	}
	if w := cl.staticInstanceListWarning(); w != "" {
		logger.Info(w)
	}
	if len(otherProviders) > 0 {
		logger.Info("Flags of cloud providers this build does not ship are ignored", "flags", otherProviders)
	}
	for _, name := range removed {
		logger.Info("Warning: flag was removed upstream and is accepted only for compatibility", "flag", name,
			"replacement", removedFlagReplacement(name))
	}

	stopGovernor := heapgovernor.Start(logger, cl.opts.HeapHeadroomRatio)
	defer stopGovernor()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGQUIT)
	defer stop()
	if err := builder.Start(klog.NewContext(ctx, logger), cl.opts); err != nil {
		logger.Error(err, "Autoscaler stopped")
		return 1
	}
	logger.Info("Autoscaler stopped cleanly")
	return 0
}

func removedFlagReplacement(name string) string {
	if name == "max-empty-bulk-delete" {
		return "--max-scale-down-parallelism"
	}
	return "none"
}
