package kwok

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TestReadOnlyBuildWritesNothing: built for explain, the provider restores
// its instances but creates no initial instance, no Node, and saves no state,
// even when a Node of its group goes away (which makes the started provider
// save), nor on Cleanup.
func TestReadOnlyBuildWritesNothing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(file, []byte(`
nodeGroups:
- name: pool
  maxSize: 10
  initialSize: 2
  template:
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pool-a", Annotations: map[string]string{NodeGroupAnnotation: "pool"}},
		Spec: apiv1.NodeSpec{ProviderID: "kwok://pool-a"}}
	for _, readOnly := range []bool{true, false} {
		client := fake.NewClientset(node.DeepCopy())
		ctx, cancel := context.WithCancel(context.Background())
		p, err := Build(ctx, cloudprovider.BuildOptions{ReadOnly: readOnly, KubeClient: client,
			Options: cloudprovider.Options{Namespace: testNamespace, CloudConfig: file, KwokProviderEnabled: true}})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		kp := p.(*Provider)
		kp.mu.Lock()
		kp.changed() // as when a Node of the group is deleted by someone
		kp.mu.Unlock()
		time.Sleep(500 * time.Millisecond) // past several of the scheduler's 100 ms ticks
		if err := p.Cleanup(ctx); err != nil {
			t.Errorf("readOnly %v: Cleanup: %v", readOnly, err)
		}
		cancel()
		kp.Stop()
		var writes []string
		for _, a := range client.Actions() {
			if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
				writes = append(writes, v+" "+a.GetResource().Resource)
			}
		}
		if readOnly && len(writes) != 0 {
			t.Errorf("read-only provider wrote: %v", writes)
		}
		if !readOnly && len(writes) == 0 {
			t.Error("the started provider wrote nothing: the test does not exercise what read-only turns off")
		}
	}
}
