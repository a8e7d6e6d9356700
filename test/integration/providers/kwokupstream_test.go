package providers

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestKwokProviderReadsUpstreamFormat: an upstream kwok set-up works
// unchanged: KWOK_PROVIDER_CONFIGMAP names the config ConfigMap (upstream's
// format), whose template nodes come from the kwok-provider-templates
// ConfigMap, grouped by a label, sized by annotations; a pending pod gets a
// node of that group, and the group starts at its desired-count.
func TestKwokProviderReadsUpstreamFormat(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool := framework.UniqueName("upstream")
	templates := fmt.Sprintf(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: template-%[1]s
    labels: {kwok-nodegroup: %[1]s, pool: %[1]s, %[2]s: %[3]s}
    annotations:
      cluster-autoscaler.kwok.nodegroup/max-count: "3"
      cluster-autoscaler.kwok.nodegroup/desired-count: "1"
  status:
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
    allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
`, pool, framework.TestNamespaceLabel, e.Namespace)
	for name, data := range map[string]map[string]string{
		"my-kwok-config":          {"config": "apiVersion: v1alpha1\nreadNodesFrom: configmap\nnodegroups:\n  fromNodeLabelKey: kwok-nodegroup\nnodes:\n  skipTaint: true\nconfigmap:\n  name: kwok-provider-templates\n"},
		"kwok-provider-templates": {"templates": templates},
	} {
		cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name}, Data: data}
		if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(kwok.UpstreamConfigMapEnv, "my-kwok-config")
	t.Setenv(kwok.UpstreamNamespaceEnv, e.Namespace)
	p := itest.StartAutoscaler(t, "autoscaler", "--kubeconfig="+e.Kubeconfig, "--namespace="+e.Namespace,
		"--cloud-provider=kwok", "--scan-interval=1s", "--v=4")
	e.Eventually(60*time.Second, "the desired-count node", func(ctx context.Context) (bool, error) {
		return itest.NodesPerPool(e)[pool] == 1, nil
	})
	itest.CreatePods(e, "web", 2, "3", map[string]string{"pool": pool}) // one 4-CPU node each: one more node
	e.Eventually(90*time.Second, "both pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	if got := itest.NodesPerPool(e)[pool]; got != 2 {
		t.Errorf("%d nodes of %s, want 2", got, pool)
	}
	if !p.Log.Written("Read upstream's kwok provider format") {
		t.Error("the upstream format is not logged")
	}
}
