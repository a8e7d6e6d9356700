package aws

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

var optionDefaults = config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGPUUtilizationThreshold: 0.5,
	ScaleDownUnneededTime: 10 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute}

func TestParseOptions(t *testing.T) {
	defaults := optionDefaults
	cases := []struct {
		name    string
		tags    map[string]string
		want    *config.NodeGroupAutoscalingOptions
		wantErr string
	}{
		{name: "no option tags: defaults (nil)", tags: map[string]string{"Name": "x"}},
		{
			name: "every option, upstream's prefix and formats",
			tags: map[string]string{
				OptionTagPrefix + "scaledownutilizationthreshold":    "0.3",
				OptionTagPrefix + "scaledowngpuutilizationthreshold": "0.7",
				OptionTagPrefix + "scaledownunneededtime":            "5m0s",
				OptionTagPrefix + "scaledownunreadytime":             "1h",
				OptionTagPrefix + "ignoredaemonsetsutilization":      "true",
				OptionTagPrefix + "maxnodeprovisiontime":             "7m",
				OptionTagPrefix + "somethingnew":                     "whatever",
			},
			want: &config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.3, ScaleDownGPUUtilizationThreshold: 0.7,
				ScaleDownUnneededTime: 5 * time.Minute, ScaleDownUnreadyTime: time.Hour, MaxNodeProvisionTime: 7 * time.Minute,
				IgnoreDaemonSetsUtilization: true},
		},
		{
			name: "the alias prefix alone",
			tags: map[string]string{OptionTagAliasPrefix + "scaledownunneededtime": "3m", OptionTagAliasPrefix + "ignoredaemonsetsutilization": "1"},
			want: &config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGPUUtilizationThreshold: 0.5,
				ScaleDownUnneededTime: 3 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute,
				IgnoreDaemonSetsUtilization: true},
		},
		{
			name: "both prefixes: upstream's wins per option, the alias still sets the others",
			tags: map[string]string{
				OptionTagAliasPrefix + "scaledownunneededtime":         "3m",
				OptionTagPrefix + "scaledownunneededtime":              "8m",
				OptionTagAliasPrefix + "scaledownutilizationthreshold": "0.2",
			},
			want: &config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.2, ScaleDownGPUUtilizationThreshold: 0.5,
				ScaleDownUnneededTime: 8 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute},
		},
		{
			name: "a malformed alias shadowed by upstream's tag is not read",
			tags: map[string]string{OptionTagAliasPrefix + "scaledownunneededtime": "soon", OptionTagPrefix + "scaledownunneededtime": "8m"},
			want: &config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGPUUtilizationThreshold: 0.5,
				ScaleDownUnneededTime: 8 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute},
		},
		{name: "ratio above 1", tags: map[string]string{OptionTagPrefix + "scaledownutilizationthreshold": "1.5"}, wantErr: "outside 0..1"},
		{name: "not a duration", tags: map[string]string{OptionTagPrefix + "scaledownunneededtime": "soon"}, wantErr: "not a duration"},
		{name: "negative duration", tags: map[string]string{OptionTagPrefix + "scaledownunreadytime": "-1m"}, wantErr: "negative"},
		{name: "not a bool", tags: map[string]string{OptionTagPrefix + "ignoredaemonsetsutilization": "perhaps"},
			wantErr: OptionTagPrefix + "ignoredaemonsetsutilization"},
		{name: "malformed alias", tags: map[string]string{OptionTagAliasPrefix + "scaledownunneededtime": "soon"},
			wantErr: OptionTagAliasPrefix + "scaledownunneededtime"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseOptions(tc.tags, defaults)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
		})
	}
}

// TestGetOptionsReadsUpstreamTags: a group tagged as upstream's README says
// gets its options, through the SDK against the fake; a group with both
// prefixes gets upstream's values.
func TestGetOptionsReadsUpstreamTags(t *testing.T) {
	s := startFake(t)
	migrated := groupOf("migrated", 1)
	migrated.Tags = map[string]string{
		"k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownutilizationthreshold": "0.25",
		"k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime":         "2m0s",
		"k8s.io/cluster-autoscaler/node-template/autoscaling-options/ignoredaemonsetsutilization":   "true",
	}
	both := groupOf("both", 1)
	both.Tags = map[string]string{
		"k8s.io/cluster-autoscaler/node-template/autoscaling-options/scaledownunneededtime": "2m0s",
		"k8s.io/cluster-autoscaler/autoscaling-options/scaledownunneededtime":               "30m",
		"k8s.io/cluster-autoscaler/autoscaling-options/scaledownunreadytime":                "45m",
	}
	s.AddGroup(migrated)
	s.AddGroup(both)
	p := newTestProvider(t, []string{"0:10:migrated", "0:10:both"}, nil)
	ctx := context.Background()
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		group string
		want  config.NodeGroupAutoscalingOptions
	}{
		{"migrated", config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.25, ScaleDownGPUUtilizationThreshold: 0.5,
			ScaleDownUnneededTime: 2 * time.Minute, ScaleDownUnreadyTime: 20 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute,
			IgnoreDaemonSetsUtilization: true}},
		{"both", config.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5, ScaleDownGPUUtilizationThreshold: 0.5,
			ScaleDownUnneededTime: 2 * time.Minute, ScaleDownUnreadyTime: 45 * time.Minute, MaxNodeProvisionTime: 15 * time.Minute}},
	} {
		got, err := group(t, p, tc.group).GetOptions(ctx, optionDefaults)
		if err != nil {
			t.Fatalf("%s: %v", tc.group, err)
		}
		if got == nil {
			t.Fatalf("%s: no options (the defaults), want the tags' options", tc.group)
		}
		if d := cmp.Diff(tc.want, *got); d != "" {
			t.Errorf("%s: options (-want +got):\n%s", tc.group, d)
		}
	}
}
