package config

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseNodeGroupSpec(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    NodeGroupSpec
		wantErr bool
	}{
		{in: "1:10:ng1", want: NodeGroupSpec{Min: 1, Max: 10, Name: "ng1"}},
		{in: "0:0:ng", want: NodeGroupSpec{Min: 0, Max: 0, Name: "ng"}},
		{in: "1:3:cx21:nbg1:pool:with:colons", want: NodeGroupSpec{Min: 1, Max: 3, Name: "cx21:nbg1:pool:with:colons"}},
		{in: "a:b:c", wantErr: true},
		{in: "1:10", wantErr: true},
		{in: "1:10:", wantErr: true},
		{in: "10:1:ng", wantErr: true},
		{in: "-1:1:ng", wantErr: true},
		{in: "0:99999999999:ng", wantErr: true},
	} {
		got, err := ParseNodeGroupSpec(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err = %v, wantErr %v", tc.in, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParseRangeAndGPULimit(t *testing.T) {
	if r, err := ParseRange("0:320000"); err != nil || r != (Range{0, 320000}) {
		t.Errorf("ParseRange(0:320000) = %v, %v", r, err)
	}
	for _, bad := range []string{"", "1", "1:2:3", "x:1", "2:1", "-1:5"} {
		if _, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q): no error", bad)
		}
	}
	if g, err := ParseGPULimit("nvidia-tesla-k80:0:8"); err != nil || g != (GPULimit{"nvidia-tesla-k80", 0, 8}) {
		t.Errorf("ParseGPULimit = %v, %v", g, err)
	}
	for _, bad := range []string{"k80:1", ":0:1", "k80:2:1", "k80:a:1"} {
		if _, err := ParseGPULimit(bad); err == nil {
			t.Errorf("ParseGPULimit(%q): no error", bad)
		}
	}
}

func TestParseDrainPriorityConfig(t *testing.T) {
	got, err := ParseDrainPriorityConfig("0:60, 10000:20,1000:100")
	if err != nil {
		t.Fatal(err)
	}
	want := []DrainPriority{{10000, 20}, {1000, 100}, {0, 60}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{"1", "1:x", "x:1", "1:-5", "1:2,1:3", "1:99999999999999999", "1:2,"} {
		if _, err := ParseDrainPriorityConfig(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	o := Defaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("Defaults() does not validate: %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := Defaults()
	o.PredicateParallelism = 0
	o.MaxNodesPerScaleUp = 0
	o.Expanders = []string{"nope"}
	err := o.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, flag := range []string{"--predicate-parallelism", "--max-nodes-per-scaleup", "--expander"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("error does not name %s: %v", flag, err)
		}
	}
}

// TestOddValuesUpstreamAcceptsAreWarnings: values upstream accepts are not
// refused, however odd; each gets a warning naming its flag.
func TestOddValuesUpstreamAcceptsAreWarnings(t *testing.T) {
	o := Defaults()
	o.Namespace = "Not_A_Label"
	o.NodeGroupDefaults.ScaleDownUtilizationThreshold = 2
	o.MaxFreeDifferenceRatio = -0.5
	o.MaxScaleDownParallelism = 0
	o.MaxDrainParallelism = 0
	o.InitialNodeGroupBackoff, o.MaxNodeGroupBackoff = 10*time.Minute, time.Minute
	o.ProvReqInitialBackoff, o.ProvReqMaxBackoff = 10*time.Minute, time.Minute
	o.MaxTotalUnreadyPercentage = 150
	o.CapacityBufferReadyReplicasEnabled = true
	if err := o.Validate(); err != nil {
		t.Fatalf("refused: %v", err)
	}
	warns := strings.Join(o.Warnings(), "\n")
	for _, flag := range []string{"--namespace", "--scale-down-utilization-threshold", "--max-free-difference-ratio",
		"--max-scale-down-parallelism", "--max-drain-parallelism", "--max-node-group-backoff-duration",
		"--provisioning-request-max-backoff-time", "--max-total-unready-percentage",
		"--capacity-buffer-ready-replicas-enabled"} {
		if !strings.Contains(warns, flag) {
			t.Errorf("no warning names %s:\n%s", flag, warns)
		}
	}
	d := Defaults()
	if w := d.Warnings(); len(w) != 0 {
		t.Errorf("the defaults give warnings: %v", w)
	}
}

// TestValidateNumericBounds: values that parse but would overflow when turned
// into millicores, bytes or durations, or that are not finite, are refused.
func TestValidateNumericBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Options)
		flag string
	}{
		{"memory in bytes overflows", func(o *Options) { o.MemoryGiB = Range{Min: 0, Max: 10_000_000_000} }, "--memory-total"},
		{"cores in millicores overflow", func(o *Options) { o.Cores = Range{Min: 0, Max: math.MaxInt64 / 10} }, "--cores-total"},
		{"infinite qps", func(o *Options) { o.KubeClientQPS = math.Inf(1) }, "--kube-client-qps"},
		{"NaN qps", func(o *Options) { o.KubeClientQPS = math.NaN() }, "--kube-client-qps"},
		{"NaN ratio", func(o *Options) { o.NodeGroupDefaults.ScaleDownUtilizationThreshold = math.NaN() }, "--scale-down-utilization-threshold"},
		{"grace period overflows", func(o *Options) { o.MaxGracefulTerminationSec = math.MaxInt64 / 10 }, "--max-graceful-termination-sec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Defaults()
			tc.set(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.flag)
			}
		})
	}
	// The largest accepted limits still convert without overflow.
	o := Defaults()
	o.MemoryGiB = Range{Min: 0, Max: MaxMemoryTotalGiB}
	o.Cores = Range{Min: 0, Max: MaxCoresTotal}
	if err := o.Validate(); err != nil {
		t.Fatalf("largest limits refused: %v", err)
	}
	if o.MemoryGiB.Max<<30 <= 0 || o.Cores.Max*1000 <= 0 {
		t.Fatal("largest accepted limits overflow")
	}
}
