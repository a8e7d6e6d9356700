package readonly

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// TestConfigRefusesEveryWrite: a client built on Config reads, and every
// write fails before it reaches the server. (The explain command's client
// against the real API server is tested in test/integration.)
func TestConfigRefusesEveryWrite(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(Config(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods := client.CoreV1().Pods("ns")
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatalf("GET refused: %v", err)
	}
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for name, write := range map[string]func() error{
		"create": func() error { _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); return err },
		"update": func() error { _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); return err },
		"patch": func() error {
			_, err := pods.Patch(ctx, "p", "application/merge-patch+json", []byte(`{}`), metav1.PatchOptions{})
			return err
		},
		"delete": func() error { return pods.Delete(ctx, "p", metav1.DeleteOptions{}) },
		"eviction": func() error {
			return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
		},
	} {
		if err := write(); !errors.Is(err, ErrWrite) {
			t.Errorf("%s: %v, want ErrWrite", name, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{http.MethodGet}, seen); diff != "" {
		t.Errorf("requests that reached the server (-want +got):\n%s", diff)
	}
}

// TestProviderChangesNothing: increases are recorded and succeed without
// reaching the provider; deletions and decreases fail.
func TestProviderChangesNothing(t *testing.T) {
	ctx := context.Background()
	fake := fakeprovider.NewProvider()
	fake.AddNodeGroup("g", 0, 10, 2, nil)
	p := NewProvider(fake)
	groups, err := p.NodeGroups(ctx)
	if err != nil || len(groups) != 1 {
		t.Fatalf("node groups %v, %v", groups, err)
	}
	g := groups[0]
	if err := g.IncreaseSize(ctx, 3); err != nil {
		t.Errorf("IncreaseSize: %v", err)
	}
	if err := g.AtomicIncreaseSize(ctx, 1); err != nil {
		t.Errorf("AtomicIncreaseSize: %v", err)
	}
	if err := g.DeleteNodes(ctx, nil); !errors.Is(err, ErrWrite) {
		t.Errorf("DeleteNodes: %v, want ErrWrite", err)
	}
	if err := g.ForceDeleteNodes(ctx, nil); !errors.Is(err, ErrWrite) {
		t.Errorf("ForceDeleteNodes: %v, want ErrWrite", err)
	}
	if err := g.DecreaseTargetSize(ctx, -1); !errors.Is(err, ErrWrite) {
		t.Errorf("DecreaseTargetSize: %v, want ErrWrite", err)
	}
	if size, _ := g.TargetSize(ctx); size != 2 {
		t.Errorf("target size %d, want 2: unchanged", size)
	}
	want := []Increase{{NodeGroup: "g", Delta: 3}, {NodeGroup: "g", Delta: 1, Atomic: true}}
	if diff := cmp.Diff(want, p.Increases()); diff != "" {
		t.Errorf("increases (-want +got):\n%s", diff)
	}
}

// cleanupCounter is a provider whose Cleanup would save its state.
type cleanupCounter struct {
	*fakeprovider.Provider
	calls int
}

func (c *cleanupCounter) Cleanup(context.Context) error { c.calls++; return nil }

// TestProviderCleanupIsNotForwarded: a read-only run's Cleanup does not
// reach the provider, whose Cleanup writes (the kwok provider's state
// ConfigMap, the external gRPC server's Cleanup).
func TestProviderCleanupIsNotForwarded(t *testing.T) {
	inner := &cleanupCounter{Provider: fakeprovider.NewProvider()}
	if err := NewProvider(inner).Cleanup(context.Background()); err != nil || inner.calls != 0 {
		t.Errorf("Cleanup: %v, %d call(s) forwarded; want nil and none", err, inner.calls)
	}
}
