package informercache

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// sibling is another pod of base's workload: other name, UID, node and IP,
// decoded separately (no part in common with base).
func sibling(base *apiv1.Pod, name, node string) *apiv1.Pod {
	p := base.DeepCopy()
	p.Name, p.UID, p.Spec.NodeName = name, types.UID(name+"-uid"), node
	p.Status.PodIP = "10.0.0." + name[len(name)-1:]
	return p
}

func sameBacking[T any](a, b []T) bool { return len(a) > 0 && len(b) > 0 && &a[0] == &b[0] }

func sameMap(a, b map[string]string) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestPodSharerSharesAWorkloadsParts: two pods of one workload end up with
// the same containers, labels, annotations, owners, tolerations, spread
// constraints and security context (one copy), each still equal to what it
// was; a pod of another shape keeps its own.
func TestPodSharerSharesAWorkloadsParts(t *testing.T) {
	base := loadPod(t, "pod-deployment-typical.yaml")
	a, b := sibling(base, "p1", "n1"), sibling(base, "p2", "n2")
	other := sibling(base, "p3", "n3")
	other.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse("2")
	trim := NewTrimmer()
	var want []*apiv1.Pod
	for _, p := range []*apiv1.Pod{a, b, other} {
		w := p.DeepCopy()
		trimPod(w)
		w.ManagedFields = nil
		want = append(want, w)
		if _, err := trim.Transform(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []*apiv1.Pod{a, b, other} {
		if diff := cmp.Diff(want[i], p); diff != "" {
			t.Errorf("pod %s changed by sharing (-want +got):\n%s", p.Name, diff)
		}
	}
	checks := map[string]bool{
		"containers":      sameBacking(a.Spec.Containers, b.Spec.Containers),
		"init containers": sameBacking(a.Spec.InitContainers, b.Spec.InitContainers),
		"labels":          sameMap(a.Labels, b.Labels),
		"annotations":     sameMap(a.Annotations, b.Annotations),
		"owners":          sameBacking(a.OwnerReferences, b.OwnerReferences),
		"tolerations":     sameBacking(a.Spec.Tolerations, b.Spec.Tolerations),
		"spread":          sameBacking(a.Spec.TopologySpreadConstraints, b.Spec.TopologySpreadConstraints),
		"security":        a.Spec.SecurityContext == b.Spec.SecurityContext,
	}
	for part, shared := range checks {
		if !shared {
			t.Errorf("%s not shared by two pods of one workload", part)
		}
	}
	if sameBacking(a.Spec.Containers, other.Spec.Containers) {
		t.Error("containers of another shape shared")
	}
	if !sameBacking(a.Spec.InitContainers, other.Spec.InitContainers) || !sameMap(a.Labels, other.Labels) {
		t.Error("the equal parts of a pod of another shape not shared")
	}
	// A copy owns its parts: changing it leaves the cached pods alone.
	c := a.DeepCopy()
	c.Labels["changed"] = "yes"
	c.Spec.Containers[0].Image = "changed"
	if _, ok := b.Labels["changed"]; ok || b.Spec.Containers[0].Image == "changed" {
		t.Error("a deep copy still shares parts with the cache")
	}
}

// withAnnotation is a pod of base's workload carrying a large annotation
// of its own (as a CNI's per-pod network status would be).
func withAnnotation(base *apiv1.Pod, name string, size int) *apiv1.Pod {
	p := sibling(base, name, "n")
	p.Annotations = map[string]string{"example.com/status": name + strings.Repeat("x", size)}
	return p
}

// remembered reports whether s holds a part equal to the pod's annotations.
func remembered(s *podSharer, pod *apiv1.Pod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.parts[mapKey(kindAnnotations, pod.Annotations).key]
	return ok
}

// TestPodSharerForgetsPartsNoCachedPodHolds: once pods leave the informer's
// store, a sweep drops the parts only they held (their large annotations),
// and the bytes they counted; the parts of the pods still cached stay, and
// a new pod of their workload still shares them.
func TestPodSharerForgetsPartsNoCachedPodHolds(t *testing.T) {
	base := loadPod(t, "pod-deployment-typical.yaml")
	s := newPodSharer(1 << 30)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	var pods []*apiv1.Pod
	for i := range 6 {
		p := withAnnotation(base, fmt.Sprintf("p%d", i), 8<<10)
		s.share(p)
		pods = append(pods, p)
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	before := s.heldBytes()
	for _, p := range pods[:4] {
		if err := store.Delete(p); err != nil {
			t.Fatal(err)
		}
	}
	dropped, freed := s.sweep(store.List())
	if dropped != 4 || freed < 4*(8<<10) {
		t.Errorf("sweep dropped %d parts, %d bytes; want the 4 annotations of the deleted pods (>= %d bytes)", dropped, freed, 4*(8<<10))
	}
	if got := s.heldBytes(); got != before-freed {
		t.Errorf("held %d bytes after the sweep, want %d", got, before-freed)
	}
	for i, p := range pods {
		if got, want := remembered(s, p), i >= 4; got != want {
			t.Errorf("annotations of %s remembered = %v, want %v (pod cached: %v)", p.Name, got, want, want)
		}
	}
	next := sibling(base, "p9", "n")
	s.share(next)
	if !sameBacking(next.Spec.Containers, pods[5].Spec.Containers) || !sameMap(next.Labels, pods[5].Labels) {
		t.Error("the parts of the cached pods are no longer shared after the sweep")
	}
	// Nothing cached: everything goes but what a pod took since the sweep began.
	if dropped, _ := s.sweep(nil); dropped == 0 || s.heldBytes() != 0 {
		t.Errorf("an empty cache left %d bytes held (dropped %d parts)", s.heldBytes(), dropped)
	}
}

// TestPodSharerBoundIsInBytes: the sharer never counts more than its bound
// in bytes, whatever the number of parts; a pod whose part does not fit
// keeps its own (equal) copy, a sweep is asked for, and once the sweep has
// dropped the parts of deleted pods there is room again.
func TestPodSharerBoundIsInBytes(t *testing.T) {
	base := loadPod(t, "pod-bound-minimal.yaml")
	const annotation = 4 << 10
	first := withAnnotation(base, "p0", annotation)
	s := newPodSharer(1 << 30)
	s.share(first.DeepCopy())
	// Room for the shared parts of the workload and two annotations.
	limit := s.heldBytes() + annotation + 2*partOverhead + 64
	s = newPodSharer(limit)
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := range 10 {
		p := withAnnotation(base, fmt.Sprintf("p%d", i), annotation)
		want := p.Annotations["example.com/status"]
		s.share(p)
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
		if got := s.heldBytes(); got > limit {
			t.Fatalf("after %s: %d bytes held, bound %d", p.Name, got, limit)
		}
		if p.Annotations["example.com/status"] != want {
			t.Fatalf("%s lost its annotation", p.Name)
		}
		if got := remembered(s, p); got != (i < 2) {
			t.Errorf("annotations of %s remembered = %v, want %v", p.Name, got, i < 2)
		}
	}
	select {
	case <-s.full:
	default:
		t.Error("the bound was reached and no sweep was asked for")
	}
	for _, p := range store.List()[:] {
		if pod := p.(*apiv1.Pod); pod.Name == "p0" || pod.Name == "p1" {
			_ = store.Delete(pod)
		}
	}
	s.sweep(store.List())
	next := withAnnotation(base, "p10", annotation)
	s.share(next)
	if !remembered(s, next) {
		t.Error("no room after the parts of deleted pods were swept")
	}
}

// podInformer stands in for the pod informer the sweeper reads.
type podInformer struct{ store cache.Store }

func (i podInformer) HasSynced() bool       { return true }
func (i podInformer) GetStore() cache.Store { return i.store }

// TestPodSharerRunSweeps: the sweeper sweeps every period, and when the
// bound is reached, no sooner than the gap after its last sweep.
func TestPodSharerRunSweeps(t *testing.T) {
	base := loadPod(t, "pod-bound-minimal.yaml")
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newPodSharer(1 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx, podInformer{store}, clk, time.Minute, 5*time.Second)
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, step time.Duration, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) {
				if cond() {
					return true, nil
				}
				clk.Step(step)
				return false, nil
			})
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	s.share(withAnnotation(base, "gone", 1<<10))
	waitFor("the periodic sweep", 10*time.Second, func() bool { return s.heldBytes() == 0 })

	kept := withAnnotation(base, "kept", 1<<10)
	s.share(kept)
	_ = store.Add(kept)
	held := s.heldBytes()
	s.maxBytes = held // full: the next new part asks for a sweep
	s.share(withAnnotation(base, "gone2", 1<<10))
	s.maxBytes = 1 << 30
	s.share(withAnnotation(base, "gone3", 1<<10))
	start := clk.Now()
	waitFor("the sweep the bound asked for", time.Second, func() bool { return s.heldBytes() == held })
	if waited := clk.Since(start); waited < 4*time.Second || waited >= time.Minute {
		t.Errorf("the sweep came %v after the bound was reached; want the 5s gap, before the period", waited)
	}
}

// BenchmarkPodChurnMemory: the heap of the pod cache while pods with large
// annotations of their own come and go, as a CNI's per-pod status makes
// them: 1,000 pods cached at any time, 40,000 created (decoded from
// protobuf and transformed as the informer does) and deleted in all, each
// with a 4 KiB annotation no other pod has, the sharer's sweeper running as
// in the binary. It reports the live heap (after a collection) every 10,000
// pods and the process's peak RSS (VmHWM; run this benchmark alone).
//
//	go test -run xxx -bench PodChurnMemory -benchtime 1x ./cluster-autoscaler
func BenchmarkPodChurnMemory(b *testing.B) {
	const live, total, every, annotation = 1000, 40000, 10000, 4 << 10
	base := loadPod(b, "pod-deployment-typical.yaml")
	for i := 0; i < b.N; i++ {
		trim := NewTrimmer()
		store := cache.NewStore(cache.MetaNamespaceKeyFunc)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			trim.Run(ctx, podInformer{store})
		}()
		runtime.GC()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for j := range total {
			data, err := withAnnotation(base, fmt.Sprintf("p%d", j), annotation).Marshal()
			if err != nil {
				b.Fatal(err)
			}
			p := &apiv1.Pod{}
			if err := p.Unmarshal(data); err != nil {
				b.Fatal(err)
			}
			if _, err := trim.Transform(p); err != nil {
				b.Fatal(err)
			}
			if err := store.Add(p); err != nil {
				b.Fatal(err)
			}
			if j >= live {
				if err := store.Delete(&apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
					Name: fmt.Sprintf("p%d", j-live)}}); err != nil {
					b.Fatal(err)
				}
			}
			if (j+1)%every == 0 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				b.ReportMetric(float64(int64(m.HeapAlloc)-int64(m0.HeapAlloc))/(1<<20), fmt.Sprintf("heap-MiB@%dk", (j+1)/1000))
			}
		}
		cancel()
		<-done
	}
	if hwm := procStatusKiB(b, "VmHWM"); hwm > 0 {
		b.ReportMetric(float64(hwm)/1024, "peak-RSS-MiB")
	}
}

// procStatusKiB reads a "<field>: <n> kB" line of /proc/self/status; 0
// where there is none.
func procStatusKiB(b *testing.B, field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkPodSharerSweep: one sweep over 100,000 cached pods of 300-pod
// workloads, each with an annotation of its own (the sweeper's cost per
// minute, or per 5 s while the bound is reached).
//
//	go test -run xxx -bench PodSharerSweep ./cluster-autoscaler
func BenchmarkPodSharerSweep(b *testing.B) {
	const n, perWorkload = 100000, 300
	base := loadPod(b, "pod-deployment-typical.yaml")
	s := newPodSharer(1 << 40)
	cached := make([]any, n)
	for j := range cached {
		p := withAnnotation(base, fmt.Sprintf("p%d", j), 64)
		p.Labels = map[string]string{"app": fmt.Sprintf("wl-%d", j/perWorkload)}
		s.share(p)
		cached[j] = p
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if dropped, _ := s.sweep(cached); dropped != 0 {
			b.Fatalf("dropped %d parts of cached pods", dropped)
		}
	}
}
