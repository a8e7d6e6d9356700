package framework

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
)

// FuzzSchedulerConfigFile feeds arbitrary bytes to --scheduler-config-file.
// Building the framework from them never panics, and fails with an error
// naming the flag whenever kube-scheduler would refuse the file (it does
// not decode as a KubeSchedulerConfiguration, or fails kube-scheduler's
// validation). A framework built from the file answers whether a pod fits
// a node with a verdict, never a panic.
func FuzzSchedulerConfigFile(f *testing.F) {
	const head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
	for _, s := range []string{
		head,
		head + "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      disabled:\n      - name: TaintToleration\n",
		head + "profiles:\n- schedulerName: a\n  plugins:\n    filter:\n      disabled: [{name: '*'}]\n- schedulerName: b\n",
		head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n" +
			"        resources: [{name: cpu, weight: 1}]\n",
		head + "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints:\n" +
			"      - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}\n",
		head + "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      addedAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n" +
			"          nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [a]}]}]\n",
		head + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy: {type: Nope}\n",
		head + "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n    args: {hardPodAffinityWeight: -1}\n",
		head + "profiles:\n- pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n      defaultConstraints:\n" +
			"      - {maxSkew: 0, topologyKey: '', whenUnsatisfiable: Sometimes}\n",
		head + "percentageOfNodesToScore: 300\nparallelism: -1\n",
		head + "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NoSuchPlugin}]\n",
		head + "profiles:\n- plugins:\n    queueSort:\n      enabled: [{name: PrioritySort}, {name: PrioritySort}]\n",
		head + "profiles:\n- schedulerName: x\n- schedulerName: x\n",
		head + "profiles: []\n",
		head + "profiles:\n- pluginConfig:\n  - name: DynamicResources\n    args: {}\n",
		head + "unknownField: 1\n",
		"apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
		"apiVersion: v1\nkind: ConfigMap\n",
		`{"apiVersion":"kubescheduler.config.k8s.io/v1","kind":"KubeSchedulerConfiguration","profiles":[{"schedulerName":"j"}]}`,
		"kind: KubeSchedulerConfiguration\n",
		"{",
		"",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "scheduler.yaml")
	node := makeNode("n", "4").Obj()
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := NewSnapshot([]*apiv1.Node{node}, nil)
		factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
		h, err := New(t.Context(), s, factory, WithSchedulerConfigFile(path))
		if err != nil {
			if !strings.Contains(err.Error(), "--scheduler-config-file") && !strings.Contains(err.Error(), "scheduler") {
				t.Fatalf("error %q does not say what it is about", err)
			}
			return
		}
		if why := kubeSchedulerRefuses(data); why != nil {
			t.Fatalf("accepted a file kube-scheduler refuses: %v\n%s", why, data)
		}
		err = h.CheckPod(t.Context(), makePod("p", "1").Obj(), "n")
		var u *Unschedulable
		if err != nil && !errors.As(err, &u) {
			t.Fatalf("a pod against a node: %v, neither a fit nor a reason", err)
		}
	})
}

// kubeSchedulerRefuses decodes and validates data as kube-scheduler does.
func kubeSchedulerRefuses(data []byte) error {
	obj, gvk, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		return err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	if !ok {
		return errors.New("not a KubeSchedulerConfiguration")
	}
	cfg.APIVersion = gvk.GroupVersion().String() // as kube-scheduler's own loader does
	if err := schedvalidation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return err
	}
	return nil
}
