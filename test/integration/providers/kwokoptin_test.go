package providers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// instanceTypeNodes lists the Nodes the kwok provider made for group (their
// instance-type label is the group's name).
func instanceTypeNodes(e *framework.Env, group string) []apiv1.Node {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(context.Background(),
		metav1.ListOptions{LabelSelector: apiv1.LabelInstanceTypeStable + "=" + group})
	if err != nil {
		e.T.Fatal(err)
	}
	return list.Items
}

// deleteGroupNodesAtEnd deletes the group's Nodes when the test ends (Nodes
// of a --nodes group lack the framework's cleanup label).
func deleteGroupNodesAtEnd(e *framework.Env, group string) {
	e.T.Cleanup(func() {
		for _, n := range instanceTypeNodes(e, group) {
			_ = e.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	})
}

// optInConfig is a kwok config of one group with one initial instance: a
// provider that starts creates its Node at once.
func optInConfig(e *framework.Env, group string) string {
	return fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  minSize: 0
  maxSize: 3
  initialSize: 1
  template:
    labels: {%[2]s: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, group, framework.TestNamespaceLabel, e.Namespace)
}

// TestKwokRefusesAClusterNotPointedAtIt: the command line an AWS values file
// rendered with cloudProvider kwok gives (--cloud-provider=kwok
// --nodes=1:10:my-asg, here with --enforce-node-group-min-size so that a
// started provider would make a Node at once), and a --cloud-config file
// alone, against a cluster without the ConfigMap kwok-provider-config: the
// process exits 1 at start-up with an error naming the two ways to opt in,
// and no Node is created.
func TestKwokRefusesAClusterNotPointedAtIt(t *testing.T) {
	e := framework.New(t)
	for name, extra := range map[string]func(group string) []string{
		"--nodes": func(group string) []string {
			return []string{"--nodes=1:10:" + group, "--enforce-node-group-min-size=true"}
		},
		"--cloud-config": func(group string) []string {
			return []string{"--cloud-config=" + itest.WriteKwokConfig(e, optInConfig(e, group))}
		},
	} {
		t.Run(strings.TrimPrefix(name, "--"), func(t *testing.T) {
			group := framework.UniqueName("my-asg")
			deleteGroupNodesAtEnd(e, group)
			args := append([]string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace,
				"--cloud-provider=kwok", "--scan-interval=1s", "--v=2"}, extra(group)...)
			p := itest.StartAutoscaler(t, "autoscaler", args...)
			if code := p.WaitExit(30 * time.Second); code != 1 {
				t.Errorf("exit code = %d, want 1", code)
			}
			for _, want := range []string{"the kwok provider was not enabled for this cluster",
				e.Namespace + "/" + kwok.ConfigMapName, kwok.EnabledFlag, "--cloud-provider"} {
				if !p.Log.Written(want) {
					t.Errorf("log does not say %q:\n%s", want, p.Log.String())
				}
			}
			if nodes := instanceTypeNodes(e, group); len(nodes) != 0 {
				t.Errorf("%d Nodes of group %s created, want none", len(nodes), group)
			}
		})
	}
}

// TestKwokStartsWhenPointedAtTheCluster: each opt-in starts the provider,
// which then creates the group's initial Node: the ConfigMap
// kwok-provider-config alone, --kwok-provider-enabled with --cloud-config, and
// --kwok-provider-enabled with --nodes (the group's minimum, enforced).
func TestKwokStartsWhenPointedAtTheCluster(t *testing.T) {
	for name, setup := range map[string]func(e *framework.Env, group string) []string{
		"ConfigMap": func(e *framework.Env, group string) []string {
			cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: kwok.ConfigMapName},
				Data: map[string]string{"config": optInConfig(e, group)}}
			if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), cm, metav1.CreateOptions{}); err != nil {
				e.T.Fatal(err)
			}
			return nil
		},
		"flag and --cloud-config": func(e *framework.Env, group string) []string {
			return []string{kwok.EnabledFlag, "--cloud-config=" + itest.WriteKwokConfig(e, optInConfig(e, group))}
		},
		"flag and --nodes": func(e *framework.Env, group string) []string {
			deleteGroupNodesAtEnd(e, group)
			return []string{kwok.EnabledFlag, "--nodes=1:3:" + group, "--enforce-node-group-min-size=true"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := framework.New(t)
			group := framework.UniqueName("pool")
			args := append([]string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace,
				"--cloud-provider=kwok", "--scan-interval=1s", "--v=2"}, setup(e, group)...)
			p := itest.StartAutoscaler(t, "autoscaler", args...)
			e.Eventually(60*time.Second, "the group's Node", func(context.Context) (bool, error) {
				return len(instanceTypeNodes(e, group)) == 1, nil
			})
			if p.Log.Contains("not enabled for this cluster") {
				t.Errorf("refused although opted in:\n%s", p.Log.String())
			}
			if code := p.Terminate(20 * time.Second); code != 0 {
				t.Errorf("exit code after SIGTERM = %d, want 0", code)
			}
		})
	}
}
