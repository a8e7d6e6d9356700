package main

import (
	"errors"
	goflag "flag"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
)

var registerGates sync.Once

// featureGates is the process's Kubernetes feature gates: every gate of
// Kubernetes (the scheduler framework the simulation runs reads them) and
// component-base's logging gates. --feature-gates sets them; an unknown gate
// or a bad value is a flag error, as upstream.
func featureGates() featuregate.MutableVersionedFeatureGate {
	registerGates.Do(func() {
		if err := logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate); err != nil {
			panic(fmt.Sprintf("registering the logging feature gates: %v", err))
		}
	})
	return utilfeature.DefaultMutableFeatureGate
}

// registerLogging adds component-base's logging flags (--logging-format,
// --log-flush-frequency, -v, --vmodule, --log-text-*, --log-json-*),
// klog's own flags (--logtostderr, --log-file, --stderrthreshold, ...) and
// --feature-gates.
func (c *commandLine) registerLogging() {
	c.logging = logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(c.logging, c.fs)
	c.klogFlags = goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(c.klogFlags)
	// As upstream's newest main: --stderrthreshold is honoured even with
	// --logtostderr=true (klog's legacy behaviour ignored it there), and it
	// starts at INFO, so that everything still reaches stderr unless the
	// operator raises it (--stderrthreshold=ERROR then keeps only errors).
	// pflag takes these values as the defaults --help and the FAQ show.
	_ = c.klogFlags.Set("legacy_stderr_threshold_behavior", "false")
	_ = c.klogFlags.Set("stderrthreshold", "INFO")
	c.fs.AddGoFlagSet(c.klogFlags) // -v and --vmodule are component-base's, registered above
	c.fs.Var(cliflag.NewMapStringBool(&c.featureGates), "feature-gates",
		"Kubernetes feature gates as <gate>=true|false,... (Kubernetes' gates, which the scheduling simulation reads, and the logging gates); an unknown gate is an error.")
}

// gates returns a copy of the process's feature gates with --feature-gates
// applied, for validation without touching the process's own (parse runs
// more than once in tests).
func (c *commandLine) gates() (featuregate.MutableVersionedFeatureGate, error) {
	g := featureGates().DeepCopy()
	if err := g.SetFromMap(c.featureGates); err != nil {
		return g, fmt.Errorf("--feature-gates: %w", err)
	}
	return g, nil
}

// validateLogging checks the logging flags against the feature gates (the
// JSON format needs LoggingBetaOptions, on by default; split streams need
// LoggingAlphaOptions).
func (c *commandLine) validateLogging() error {
	g, err := c.gates()
	if err != nil {
		return err
	}
	errs := logsapi.Validate(c.logging, g, field.NewPath("logging"))
	if len(errs) == 0 {
		return nil
	}
	var out []error
	for _, e := range errs {
		out = append(out, fmt.Errorf("%s: %s", loggingFlagOf(e.Field), e.ErrorBody()))
	}
	return errors.Join(out...)
}

// loggingFlagOf names the flag behind a field of the logging configuration.
func loggingFlagOf(path string) string {
	switch path {
	case "logging.format":
		return "--logging-format"
	case "logging.flushFrequency":
		return "--log-flush-frequency"
	case "logging.verbosity":
		return "-v"
	case "logging.vmodule":
		return "--vmodule"
	case "logging.options.text.splitStream":
		return "--log-text-split-stream"
	case "logging.options.text.infoBufferSize":
		return "--log-text-info-buffer-size"
	case "logging.options.json.splitStream":
		return "--log-json-split-stream"
	case "logging.options.json.infoBufferSize":
		return "--log-json-info-buffer-size"
	}
	return path
}

// applyLogging puts --feature-gates and the logging flags into effect, once
// per process. The
// default text format without split streams keeps klog's own output, so
// klog's flags (--log-file, --logtostderr, --stderrthreshold, ...) act as
// they always did; any other choice hands klog's output to component-base's
// logger for that format.
func (c *commandLine) applyLogging() error {
	if err := featureGates().SetFromMap(c.featureGates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	l := c.logging
	if l.Format == logsapi.DefaultLogFormat && !l.Options.Text.SplitStream {
		if err := c.klogFlags.Set("v", fmt.Sprint(l.Verbosity)); err != nil {
			return fmt.Errorf("-v: %w", err)
		}
		if err := c.klogFlags.Set("vmodule", logsapi.VModuleConfigurationPflag(&l.VModule).String()); err != nil {
			return fmt.Errorf("--vmodule: %w", err)
		}
		klog.StartFlushDaemon(l.FlushFrequency.Duration.Duration)
		return nil
	}
	return logsapi.ValidateAndApply(l, featureGates())
}
