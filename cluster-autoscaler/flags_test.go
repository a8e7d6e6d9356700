package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

type upstreamFlag struct{ name, def string }

// upstreamFlags are upstream's flags from the list (testdata/upstream.txt).
func upstreamFlags(t *testing.T) []upstreamFlag {
	t.Helper()
	l := readUpstreamList(t)
	var out []upstreamFlag
	for _, name := range slices.Sorted(maps.Keys(l.flags)) {
		out = append(out, upstreamFlag{name, l.flags[name]})
	}
	return out
}

// sameDefault compares a documented default with pflag's DefValue.
func sameDefault(doc, got string) bool {
	doc = strings.Trim(doc, `"`)
	switch {
	case doc == "—": // no documented default
		return true
	case strings.HasPrefix(doc, "0 (="): // "0 (=unlimited)"
		doc = "0"
	case doc == "2" && (got == "INFO" || got == "0"): // --stderrthreshold: upstream's main sets INFO; its FAQ table still says 2
		return true
	}
	if doc == got {
		return true
	}
	if d1, err1 := time.ParseDuration(doc); err1 == nil {
		d2, err2 := time.ParseDuration(got)
		return err2 == nil && d1 == d2
	}
	if f1, err1 := strconv.ParseFloat(doc, 64); err1 == nil {
		f2, err2 := strconv.ParseFloat(got, 64)
		return err2 == nil && f1 == f2
	}
	// pflag prints string slices as [a,b]; the table lists them as a,b.
	return "["+doc+"]" == got
}

// sampleValue returns a valid value for a flag, for parse tests.
func sampleValue(f *pflag.Flag) string {
	switch f.Name {
	case "nodes":
		return "1:10:ng-1"
	case "node-group-auto-discovery":
		return "asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/mycluster"
	case "gpu-total":
		return "nvidia-tesla-k80:0:8"
	case "expander":
		return "priority,least-waste"
	case "drain-priority-config":
		return "10000:20,1000:100,0:60"
	case "feature-gates":
		return "ContextualLogging=true"
	case "log-json-split-stream", "log-text-split-stream":
		// true needs --feature-gates=LoggingAlphaOptions=true, as upstream
		// (TestLoggingFlags).
		return "false"
	case "bypassed-scheduler-names", "allowed-scheduler-names":
		return "my-scheduler"
	case "log-backtrace-at":
		return "main.go:10"
	case "vmodule":
		return "wire=4"
	case "stderrthreshold":
		return "WARNING"
	}
	switch f.Value.Type() {
	case "bool":
		return "true"
	case "stringArray", "stringSlice", "string":
		if f.DefValue != "" && f.DefValue != "[]" {
			return strings.Trim(f.DefValue, "[]")
		}
		return "some-value"
	}
	return f.DefValue
}

// TestEveryUpstreamFlagParsesWithAValidValue passes each flag alone, the
// way an upstream manifest would, and expects no error.
func TestEveryUpstreamFlagParsesWithAValidValue(t *testing.T) {
	// klog keeps its flags' values in its global state, and a new command
	// line shows them as defaults: put back the ones this test changes, so
	// that TestUpstreamList, run after it, sees klog's own defaults.
	t.Cleanup(func() { _ = newCommandLine().parse([]string{"--log-backtrace-at=", "--vmodule="}) })
	for _, uf := range upstreamFlags(t) {
		f := newCommandLine().fs.Lookup(uf.name)
		if f == nil {
			continue // reported by TestUpstreamList
		}
		arg := "--" + uf.name + "=" + sampleValue(f)
		if uf.name == "enable-dynamic-resource-allocation" {
			arg = "--" + uf.name + "=true"
		}
		if err := newCommandLine().parse([]string{arg}); err != nil {
			t.Errorf("%s: %v", arg, err)
		}
	}
}

func TestUpstreamManifestParses(t *testing.T) {
	// Arguments of a typical upstream Deployment, including the spellings
	// and repeats manifests use.
	args := []string{
		"--v=4", "--stderrthreshold=info", "--cloud-provider=aws", "--skip-nodes-with-local-storage=false",
		"--expander=least-waste", "--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/c1",
		"--balance-similar-node-groups", "--balancing-ignore-label=topology.ebs.csi.aws.com/zone",
		"--balancing-ignore-label=eks.amazonaws.com/nodegroup", "--scale-down-unneeded-time", "5m",
		"--nodes=1:10:ng1", "--nodes=0:5:ng2", "--cores-total=0:640", "--memory-total=0:2560",
		"--gpu-total=nvidia-a100:0:16", "--logtostderr=true", "--log_dir=/tmp", "--max-empty-bulk-delete=20",
		"--leader-elect-resource-namespace=kube-system", "--aws-use-static-instance-list=true",
	}
	c := newCommandLine()
	if err := c.parse(args); err != nil {
		t.Fatal(err)
	}
	o := c.opts
	if diff := cmp.Diff([]string{"1:10:ng1", "0:5:ng2"}, o.NodeGroups); diff != "" {
		t.Errorf("--nodes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"topology.ebs.csi.aws.com/zone", "eks.amazonaws.com/nodegroup"}, o.BalancingIgnoreLabels); diff != "" {
		t.Errorf("--balancing-ignore-label (-want +got):\n%s", diff)
	}
	if o.Cores != (config.Range{Min: 0, Max: 640}) || o.MemoryGiB != (config.Range{Min: 0, Max: 2560}) {
		t.Errorf("cores %v memory %v", o.Cores, o.MemoryGiB)
	}
	if o.NodeGroupDefaults.ScaleDownUnneededTime != 5*time.Minute {
		t.Errorf("--scale-down-unneeded-time = %v", o.NodeGroupDefaults.ScaleDownUnneededTime)
	}
	if o.MaxScaleDownParallelism != 20 {
		t.Errorf("--max-empty-bulk-delete did not set max-scale-down-parallelism: %d", o.MaxScaleDownParallelism)
	}
	if o.SkipNodesWithLocalStorage || !o.BalanceSimilarNodeGroups {
		t.Errorf("bools not applied: %+v", o)
	}
	notYet, others, removed := c.notices()
	if len(others) != 0 || !slices.Contains(notYet, "aws-use-static-instance-list") {
		t.Errorf("notices: other providers %v, not acted on %v; want aws-use-static-instance-list among the latter (the aws provider has no static list)", others, notYet)
	}
	if diff := cmp.Diff([]string{"max-empty-bulk-delete"}, removed); diff != "" {
		t.Errorf("removed notices (-want +got):\n%s", diff)
	}
	if w := c.staticInstanceListWarning(); !strings.Contains(w, "ec2:DescribeInstanceTypes") {
		t.Errorf("--aws-use-static-instance-list=true warning %q, want one naming ec2:DescribeInstanceTypes", w)
	}
	if w := newCommandLine().staticInstanceListWarning(); w != "" {
		t.Errorf("warning %q without the flag", w)
	}
}

// A GPU type given twice to --gpu-total keeps its last limit, as upstream's
// limits do; it was kept twice, and scale-up read the first while
// scale-down read the last. Found by FuzzCommandLine.
func TestGPUTotalTypeGivenTwiceKeepsTheLast(t *testing.T) {
	c := newCommandLine()
	if err := c.parse([]string{"--gpu-total=t4:0:8", "--gpu-total=a100:0:2", "--gpu-total=t4:1:2"}); err != nil {
		t.Fatal(err)
	}
	want := []config.GPULimit{{Type: "t4", Min: 1, Max: 2}, {Type: "a100", Min: 0, Max: 2}}
	if diff := cmp.Diff(want, c.opts.GPUTotal); diff != "" {
		t.Errorf("--gpu-total (-want +got):\n%s", diff)
	}
	o := config.Defaults()
	o.GPUTotal = []config.GPULimit{{Type: "t4", Max: 1}, {Type: "t4", Max: 2}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--gpu-total") {
		t.Errorf("two limits of one GPU type in the options: Validate = %v", err)
	}
}

func TestDefaultsParseAndValidate(t *testing.T) {
	c := newCommandLine()
	if err := c.parse(nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(config.Defaults(), c.opts); diff != "" {
		t.Errorf("options without flags differ from config.Defaults() (-want +got):\n%s", diff)
	}
}

func TestInvalidFlagsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes=a:b:c"}, "--nodes"},
		{[]string{"--nodes=5:1:ng"}, "--nodes"},
		{[]string{"--nodes=1:5"}, "--nodes"},
		{[]string{"--cores-total=10"}, "cores-total"},
		{[]string{"--memory-total=5:1"}, "memory-total"},
		{[]string{"--memory-total=0:1e10"}, "memory-total"},
		{[]string{"--memory-total=0:10000000000"}, "--memory-total"},
		{[]string{"--cores-total=0:9223372036854775807"}, "--cores-total"},
		{[]string{"--kube-client-qps=+Inf"}, "--kube-client-qps"},
		{[]string{"--scale-up-batch-idle-duration=-1s"}, "--scale-up-batch-idle-duration"},
		{[]string{"--pending-pods-batching-timeout=-1m"}, "--pending-pods-batching-timeout"},
		{[]string{"--scale-up-batch-idle-duration=5s", "--scale-up-batch-max-duration=2s"}, "--scale-up-batch-max-duration"},
		{[]string{"--scale-down-utilization-threshold=NaN"}, "--scale-down-utilization-threshold"},
		{[]string{"--max-graceful-termination-sec=9223372036854775807"}, "--max-graceful-termination-sec"},
		{[]string{"--gpu-total=a:1"}, "gpu-total"},
		{[]string{"--scan-interval=-1s"}, "--scan-interval"},
		{[]string{"--scan-interval=ten"}, "scan-interval"},
		{[]string{"--expander=cheapest"}, "--expander"},
		{[]string{"--expander=random,least-waste"}, "--expander"},
		{[]string{"--expander=priority,priority"}, "--expander"},
		{[]string{"--expander=grpc"}, "--grpc-expander"},
		{[]string{"--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"}, "--leader-elect-lease-duration"},
		{[]string{"--leader-elect-resource-lock=configmaps"}, "--leader-elect-resource-lock"},
		{[]string{"--drain-priority-config=1:2", "--max-graceful-termination-sec=30"}, "--drain-priority-config"},
		{[]string{"--drain-priority-config=x:2"}, "--drain-priority-config"},
		{[]string{"--enable-dynamic-resource-allocation=false"}, "--enable-dynamic-resource-allocation"},
		{[]string{"--allowed-scheduler-names=a", "--bypassed-scheduler-names=b"}, "--bypassed-scheduler-names"},
		{[]string{"--balancing-label=a", "--balancing-ignore-label=b"}, "--balancing-label"},
		{[]string{"--kube-client-qps=0"}, "--kube-client-qps"},
		{[]string{"--logging-format=xml"}, "--logging-format"},
		{[]string{"--kwok-provider-enabled"}, "--kwok-provider-enabled"}, // the default provider is gce
		{[]string{"--cloud-provider=aws", "--kwok-provider-enabled"}, "--kwok-provider-enabled"},
		{[]string{"--cloud-provider=aws", "--aws-interrupted-capacity-avoid-time=-1m"}, "--aws-interrupted-capacity-avoid-time"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"stray-argument"}, "unexpected arguments"},
	} {
		err := newCommandLine().parse(tc.args)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %q does not name %s", tc.args, err, tc.want)
		}
	}
}

func TestEveryFlagHasUsage(t *testing.T) {
	newCommandLine().fs.VisitAll(func(f *pflag.Flag) {
		if strings.TrimSpace(f.Usage) == "" {
			t.Errorf("--%s has no help text", f.Name)
		}
	})
}

// TestKwokProviderEnabledWithKwok: the opt-in parses with the kwok provider
// (and is refused with any other, TestInvalidFlagsNameTheFlag).
func TestKwokProviderEnabledWithKwok(t *testing.T) {
	c := newCommandLine()
	if err := c.parse([]string{"--cloud-provider=kwok", "--kwok-provider-enabled"}); err != nil {
		t.Fatal(err)
	}
	if !c.opts.KwokProviderEnabled {
		t.Error("--kwok-provider-enabled did not set KwokProviderEnabled")
	}
}

// --enable-graceful-degradation and --pending-pods-batching-timeout are
// upstream's, with upstream's defaults (false, 4m), and act.
func TestGracefulDegradationFlags(t *testing.T) {
	c := newCommandLine()
	if c.opts.EnableGracefulDegradation || c.opts.PendingPodsBatchingTimeout != 4*time.Minute {
		t.Errorf("defaults %t, %v; want false, 4m", c.opts.EnableGracefulDegradation, c.opts.PendingPodsBatchingTimeout)
	}
	if err := c.parse([]string{"--enable-graceful-degradation", "--pending-pods-batching-timeout=90s"}); err != nil {
		t.Fatal(err)
	}
	if !c.opts.EnableGracefulDegradation || c.opts.PendingPodsBatchingTimeout != 90*time.Second {
		t.Errorf("parsed %t, %v; want true, 1m30s", c.opts.EnableGracefulDegradation, c.opts.PendingPodsBatchingTimeout)
	}
	if c.status["enable-graceful-degradation"] != implemented || c.status["pending-pods-batching-timeout"] != implemented {
		t.Errorf("status %v, %v; want both %v", c.status["enable-graceful-degradation"],
			c.status["pending-pods-batching-timeout"], implemented)
	}
}
