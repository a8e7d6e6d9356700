package kwok

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

const testNamespace = "kube-system"

func newTestProvider(t *testing.T, client *fake.Clientset, yaml string) (*Provider, *NodeGroup) {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, cfg, client, testNamespace, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); p.Stop() })
	return p, p.groups[cfg.NodeGroups[0].Name]
}

const oneGroup = `
nodeGroups:
- name: pool
  maxSize: 100
  template:
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// savedInstances reads the state ConfigMap's instances.
func savedInstances(t *testing.T, client *fake.Clientset) map[string]bool {
	t.Helper()
	store := &stateStore{client: client, namespace: testNamespace}
	list, err := store.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, in := range list {
		out[in.Name] = true
	}
	return out
}

// TestIncreaseSurvivesConcurrentStateWrite: another writer changes the state
// ConfigMap between the provider's read and its write. The provider used to
// return "the object has been modified" from IncreaseSize, having created
// the instances all the same; now it reads again and writes its whole state.
func TestIncreaseSurvivesConcurrentStateWrite(t *testing.T) {
	client := fake.NewClientset(&apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: testNamespace, ResourceVersion: "1"},
		Data:       map[string]string{stateKey: "[]"},
	})
	var conflicts atomic.Int32
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The first two writes lose the race against another writer.
		if conflicts.Add(1) <= 2 {
			return true, nil, apierrors.NewConflict(configMapsResource, StateConfigMap,
				errors.New("the object has been modified; please apply your changes to the latest version"))
		}
		return false, nil, nil
	})
	_, g := newTestProvider(t, client, oneGroup)
	ctx := context.Background()
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Fatalf("IncreaseSize failed on a write conflict: %v", err)
	}
	if size, _ := g.TargetSize(ctx); size != 3 {
		t.Errorf("target = %d, want 3", size)
	}
	if got := len(savedInstances(t, client)); got != 3 {
		t.Errorf("state ConfigMap holds %d instances, want 3", got)
	}
}

// TestFailedIncreaseCreatesNothing: when the state cannot be written, the
// increase fails with a transient error and leaves no instance and no Node
// behind, even with a zero registration delay.
func TestFailedIncreaseCreatesNothing(t *testing.T) {
	client := fake.NewClientset()
	var broken atomic.Bool
	broken.Store(true)
	fail := func(k8stesting.Action) (bool, runtime.Object, error) {
		if broken.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is away")
		}
		return false, nil, nil
	}
	client.PrependReactor("create", "configmaps", fail)
	client.PrependReactor("update", "configmaps", fail)
	_, g := newTestProvider(t, client, oneGroup)
	ctx := context.Background()
	err := g.IncreaseSize(ctx, 2)
	if err == nil || !cloudprovider.IsTransient(err) {
		t.Fatalf("IncreaseSize = %v, want a transient error", err)
	}
	if size, _ := g.TargetSize(ctx); size != 0 {
		t.Errorf("a failed increase left the target at %d", size)
	}
	time.Sleep(500 * time.Millisecond) // several scheduler ticks
	nodes, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if len(nodes.Items) != 0 {
		t.Errorf("a failed increase created %d Nodes", len(nodes.Items))
	}
	broken.Store(false)
	if err := g.IncreaseSize(ctx, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "1 node", func() bool {
		nodes, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return len(nodes.Items) == 1
	})
	if size, _ := g.TargetSize(ctx); size != 1 {
		t.Errorf("target = %d, want 1", size)
	}
}

// TestConcurrentIncreasesAndDeletions: many increases, Node creations and a
// deletion write the state at once; none fails and none is lost.
func TestConcurrentIncreasesAndDeletions(t *testing.T) {
	client := fake.NewClientset()
	// Every third write conflicts, as it would with a second writer.
	var writes atomic.Int32
	client.PrependReactor("update", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if writes.Add(1)%3 == 0 {
			return true, nil, apierrors.NewConflict(configMapsResource, StateConfigMap, errors.New("modified"))
		}
		return false, nil, nil
	})
	cfg := `
nodeGroups:
- name: pool
  maxSize: 1000
  template:
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1h}
`
	p, g := newTestProvider(t, client, cfg)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.IncreaseSize(ctx, i%3+1); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent IncreaseSize: %v", err)
	}
	want := 0
	for i := 0; i < 40; i++ {
		want += i%3 + 1
	}
	if size, _ := g.TargetSize(ctx); size != want {
		t.Fatalf("target = %d, want %d", size, want)
	}
	if err := g.DecreaseTargetSize(ctx, -5); err != nil {
		t.Fatal(err)
	}
	want -= 5
	waitFor(t, fmt.Sprintf("%d instances saved", want), func() bool { return len(savedInstances(t, client)) == want })
	p.mu.Lock()
	for name := range savedInstances(t, client) {
		if p.instances[name] == nil {
			t.Errorf("saved instance %s is not an instance", name)
		}
	}
	p.mu.Unlock()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
