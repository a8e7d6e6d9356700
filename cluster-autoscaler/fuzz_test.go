package main

import (
	"io"
	"strings"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/builder"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/clusterapi"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// FuzzCommandLine parses a command line made of arbitrary values of the
// flags that carry structure (--nodes, --cores-total, --memory-total,
// --gpu-total twice, --node-group-auto-discovery, --node-healing-policy)
// and of arbitrary further arguments. Parsing never panics; when it
// succeeds, the options hold what the flags promise, and the providers'
// own readers of --node-group-auto-discovery and --nodes refuse or accept
// the values without panicking.
func FuzzCommandLine(f *testing.F) {
	for _, s := range [][8]string{
		{"1:10:pool", "0:320000", "0:6400000", "nvidia-tesla-t4:0:8", "nvidia-tesla-t4:1:2", "kwok:pool=a", "Ready=False:5m", ""},
		{"0:3:MachineDeployment:ns/md", "1:2", "4:8", "a:1:1", "b:0:0", "clusterapi:namespace=ns,clusterName=c,pool=x", "Ready=Unknown:1h", "--cloud-provider=clusterapi"},
		{"3:1:x", "2:1", "0:9223372036854775807", "t:2:1", ":0:1", "kwok:", "Ready=Maybe:1m", "--expander=priority,random"},
		{"1:2:", "0:9223372036854776", "0:8589934592", "cpu:0:1", "memory:0:1", "clusterapi:key", "=True:1m", "--scale-down-utilization-threshold=NaN"},
		{"", "", "", "", "", "", "", "--help"},
		{"1:2:x", "1:2", "1:2", "t:1:2", "t:0:5", "aws:tag", "Ready=True:-1s", "--drain-priority-config=1:2,1:3 --max-graceful-termination-sec=5"},
		{"1:2:x", "1:2", "1:2", "t:1:2", "u:1:2", "kwok:a=b,c", "Ready=True:1m", "--leader-elect-lease-duration=1s extra-argument"},
		{"1:2:x", "1:2", "1:2", "t:1:2", "u:1:2", "kwok:a", "Ready=True:1m", "--version --nodes=garbage"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
	}
	f.Fuzz(func(t *testing.T, nodes, cores, memory, gpu1, gpu2, discovery, policy, extra string) {
		args := []string{"--nodes=" + nodes, "--cores-total=" + cores, "--memory-total=" + memory,
			"--gpu-total=" + gpu1, "--gpu-total=" + gpu2, "--node-group-auto-discovery=" + discovery,
			"--node-healing-policy=" + policy}
		args = append(args, strings.Fields(extra)...)
		c := newCommandLine()
		c.fs.SetOutput(io.Discard)
		if err := c.parse(args); err != nil || c.version {
			return
		}
		o := c.opts
		if err := o.Validate(); err != nil {
			t.Fatalf("%q parsed, but its options are invalid: %v", args, err)
		}
		for _, s := range o.NodeGroups {
			if spec, err := config.ParseNodeGroupSpec(s); err != nil || spec.Min > spec.Max {
				t.Fatalf("%q parsed with --nodes=%q: %+v, %v", args, s, spec, err)
			}
		}
		for _, r := range []config.Range{o.Cores, o.MemoryGiB} {
			if r.Min < 0 || r.Max < r.Min {
				t.Fatalf("%q parsed with the range %s", args, r)
			}
		}
		types := map[string]bool{}
		for _, g := range o.GPUTotal {
			if g.Type == "" || g.Min < 0 || g.Max < g.Min || types[g.Type] {
				t.Fatalf("%q parsed with the GPU limits %+v", args, o.GPUTotal)
			}
			types[g.Type] = true
		}
		if _, err := builder.HealingOptions(o); err != nil {
			t.Fatalf("%q parsed, but its healing options are invalid: %v", args, err)
		}
		// The providers read --node-group-auto-discovery and --nodes
		// themselves when they are built.
		_, _ = clusterapi.WithAutoDiscovery(o.NodeGroupAutoDiscovery)
		cfg, err := kwok.ParseConfig([]byte("nodeGroups: [{name: pool, maxSize: 3, template: {labels: {pool: a}, " +
			"capacity: {cpu: 1, memory: 1Gi, pods: 10}}}]"))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MergeNodeSpecs(o.NodeGroups) == nil && cfg.FilterByDiscovery(o.NodeGroupAutoDiscovery) == nil {
			if len(cfg.NodeGroups) > 2 {
				t.Fatalf("%q: kwok ended with groups %+v", args, cfg.NodeGroups)
			}
		}
	})
}
