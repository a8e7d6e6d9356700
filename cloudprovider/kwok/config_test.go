package kwok

import (
	"strings"
	"testing"
	"time"
)

const sampleConfig = `
createQPS: 100
nodeGroups:
- name: small
  minSize: 0
  maxSize: 10
  pricePerHour: 0.2
  template:
    labels: {pool: small}
    taints: [{key: dedicated, value: batch, effect: NoSchedule}]
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults:
    registrationDelay: 2s
    outOfCapacityAfter: 5
  options:
    scaleDownUnneededTime: 1m
`

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	g := c.NodeGroups[0]
	if g.Faults.RegistrationDelay.Duration != 2*time.Second || g.Faults.OutOfCapacityAfter != 5 {
		t.Errorf("faults = %+v", g.Faults)
	}
	if got := g.Template.Allocatable.Cpu().String(); got != "4" {
		t.Errorf("allocatable cpu defaulted to %s, want capacity 4", got)
	}
	if c.Workers != 16 || c.CreateQPS != 100 {
		t.Errorf("workers %d qps %v", c.Workers, c.CreateQPS)
	}
	if g.Options.ScaleDownUnneededTime.Duration != time.Minute {
		t.Errorf("options = %+v", g.Options)
	}
}

func TestParseConfigRejects(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", "nodeGroups: []\nnodeGroup: []", "unknown field"},
		{"bad name", "nodeGroups: [{name: Big_Pool, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}}]", "name"},
		{"min above max", "nodeGroups: [{name: a, minSize: 3, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}}]", "minSize"},
		{"no capacity", "nodeGroups: [{name: a, maxSize: 1, template: {}}]", "capacity.cpu"},
		{"allocatable above capacity", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, allocatable: {cpu: 2}}}]", "exceeds"},
		{"bad rate", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {creationFailureRate: 2}}]", "rates"},
		{"bad partial failure rate", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {partialFailureRate: 1.5}}]", "partialFailureRate"},
		{"bad API error rate", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {apiErrorRate: -0.1}}]", "apiErrorRate"},
		{"bad lost response rate", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {lostResponseRate: 2}}]", "lostResponseRate"},
		{"bad duration", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {registrationDelay: soon}}]", "duration"},
		{"negative slice delay", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {resourceSliceDelay: -1s}}]", "resourceSliceDelay"},
		{"negative listing delay", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, faults: {listingDelay: -1s}}]", "listingDelay"},
		{"bad taint", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, taints: [{key: k, effect: Sometimes}]}}]", "effect"},
		// Found by FuzzConfig: each was accepted, and the Nodes (or the
		// per-group options) were refused later, or used out of range.
		{"bad label key", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, labels: {'bad key!': v}}}]", "labels"},
		{"bad annotation key", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, annotations: {'k/': v}}}]", "annotations"},
		{"negative allocatable", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, allocatable: {memory: -1}}}]", "negative"},
		{"bad resource name", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1, 'not a resource': 1}}}]", "capacity[not a resource]"},
		{"bad taint key", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, taints: [{key: 'a b', effect: NoSchedule}]}}]", "taints[0].key"},
		{"duplicate taint", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, taints: [{key: k, effect: NoSchedule}, {key: k, value: v, effect: NoSchedule}]}}]", "Duplicate"},
		{"utilization threshold", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, options: {scaleDownUtilizationThreshold: -3}}]", "scaleDownUtilizationThreshold"},
		{"negative unneeded time", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, options: {scaleDownUnneededTime: -1m}}]", "scaleDownUnneededTime"},
		{"zero provision time", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}, options: {maxNodeProvisionTime: 0s}}]", "maxNodeProvisionTime"},
		{"bad gpu label", "gpuLabel: 'a b'\nnodeGroups: []", "gpuLabel"},
		{"bad driver", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, devices: [{driver: 'GPU!', devices: [{name: g0}]}]}}]", "devices[0].driver"},
		{"no devices", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, devices: [{driver: gpu.example.com}]}}]", "devices[0].devices"},
		{"duplicate device", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, devices: [{driver: gpu.example.com, devices: [{name: g0}, {name: g0}]}]}}]", "Duplicate"},
		{"bad device name", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, devices: [{driver: gpu.example.com, devices: [{name: G_0}]}]}}]", "devices[0].devices[0].name"},
		{"unknown device field", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}, devices: [{driver: gpu.example.com, devices: [{name: g0, colour: red}]}]}}]", "unknown field"},
		{"duplicate", "nodeGroups: [{name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}}, {name: a, maxSize: 1, template: {capacity: {cpu: 1, memory: 1Gi, pods: 1}}}]", "twice"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func TestMergeNodeSpecs(t *testing.T) {
	c, err := ParseConfig([]byte(sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.MergeNodeSpecs([]string{"1:3:small", "0:7:extra"}); err != nil {
		t.Fatal(err)
	}
	if g := c.NodeGroups[0]; g.MinSize != 1 || g.MaxSize != 3 {
		t.Errorf("small = %d..%d, want 1..3", g.MinSize, g.MaxSize)
	}
	if len(c.NodeGroups) != 2 || c.NodeGroups[1].Name != "extra" || c.NodeGroups[1].MaxSize != 7 ||
		c.NodeGroups[1].Template.Capacity.Cpu().String() != "4" {
		t.Errorf("extra group = %+v", c.NodeGroups[1:])
	}
	if err := c.MergeNodeSpecs([]string{"a:b:c"}); err == nil {
		t.Error("bad --nodes accepted")
	}
}
