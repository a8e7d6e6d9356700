package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"

	"k8s.io/autoscaler/cluster-autoscaler/taints"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// disruptWatch follows, from the API server's watch, what the disruption
// benchmarks measure about pods and PodDisruptionBudgets: which pods were
// evicted (the eviction API marks a pod it evicts with the DisruptionTarget
// condition, reason EvictionByEvictionAPI; a ReplicaSet's own deletions
// carry none), when and from which node; how long each pod waited unbound;
// and every PDB status in which fewer pods were healthy than desired.
type disruptWatch struct {
	mu sync.Mutex
	// since: pods created before it are the workload as it was; a pod
	// created after it and evicted was moved a second time.
	since   time.Time
	evicted map[string]eviction
	// firstEviction is the first eviction seen per node.
	firstEviction map[string]time.Time
	created       map[string]time.Time // pods created after since
	bound         map[string]time.Time
	// violations: PDB statuses with currentHealthy < desiredHealthy.
	violations []string
	// minMargin is the least currentHealthy - desiredHealthy seen per PDB.
	minMargin map[string]int32
	// Kept across reset: every pod's node and creation and whether its
	// owner deleted it (a deletion without the eviction's condition), and
	// every node's labels and creation, so that the end can say where the
	// pods of the cut were and which nodes the evicted pods left.
	pods  map[string]podSeen
	nodes map[string]nodeSeen
	// landed: where each pod created since the reset was bound, as the
	// watch saw the node then (kind and mark), by pod.
	landed map[string]string
}

type podSeen struct {
	node      string
	createdAt time.Time
	// byOwner: deleted without the eviction API (the ReplicaSet's cut).
	byOwner bool
}

type nodeSeen struct {
	labels    map[string]string
	createdAt time.Time
	// marked: the node carried the consolidation-candidate taint when
	// last seen.
	marked bool
}

type eviction struct {
	node      string
	at        time.Time
	createdAt time.Time
}

// watchDisruption starts the watch on e's namespace until the benchmark
// ends.
func watchDisruption(t testing.TB, e *framework.Env) *disruptWatch {
	w := &disruptWatch{evicted: map[string]eviction{}, firstEviction: map[string]time.Time{},
		created: map[string]time.Time{}, bound: map[string]time.Time{}, minMargin: map[string]int32{}, since: time.Now(),
		pods: map[string]podSeen{}, nodes: map[string]nodeSeen{}, landed: map[string]string{}}
	f := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(e.Namespace))
	watchAddsAndUpdates(t, f, f.Core().V1().Pods().Informer(), func(obj any) {
		if pod, ok := obj.(*apiv1.Pod); ok {
			w.seePod(pod, time.Now())
		}
	})
	watchAddsAndUpdates(t, f, f.Policy().V1().PodDisruptionBudgets().Informer(), func(obj any) {
		if pdb, ok := obj.(*policyv1.PodDisruptionBudget); ok {
			w.seePDB(pdb, time.Now())
		}
	})
	nf := informers.NewSharedInformerFactory(e.Client, 0)
	watchAddsAndUpdates(t, nf, nf.Core().V1().Nodes().Informer(), func(obj any) {
		if n, ok := obj.(*apiv1.Node); ok {
			w.mu.Lock()
			marked := false
			for _, t := range n.Spec.Taints {
				marked = marked || t.Key == taints.ConsolidationCandidate
			}
			w.nodes[n.Name] = nodeSeen{labels: n.Labels, createdAt: n.CreationTimestamp.Time, marked: marked}
			w.mu.Unlock()
		}
	})
	return w
}

// reset starts the measured part: evictions, waits and violations seen
// before now are forgotten.
func (w *disruptWatch) reset(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since = now
	w.evicted = map[string]eviction{}
	w.firstEviction = map[string]time.Time{}
	w.created = map[string]time.Time{}
	w.bound = map[string]time.Time{}
	w.landed = map[string]string{}
	w.violations = nil
	w.minMargin = map[string]int32{}
}

func (w *disruptWatch) seePod(pod *apiv1.Pod, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.pods[pod.Name]
	if seen.node == "" {
		seen.node = pod.Spec.NodeName
	}
	seen.createdAt = pod.CreationTimestamp.Time
	if pod.DeletionTimestamp != nil && !evictedPod(pod) {
		seen.byOwner = true
	}
	w.pods[pod.Name] = seen
	if pod.CreationTimestamp.After(w.since) {
		if _, ok := w.created[pod.Name]; !ok {
			w.created[pod.Name] = pod.CreationTimestamp.Time
		}
		if _, ok := w.bound[pod.Name]; !ok && pod.Spec.NodeName != "" {
			w.bound[pod.Name] = now
			w.landed[pod.Name] = w.nodeKind(pod.Spec.NodeName, "size", true)
		}
	}
	if _, ok := w.evicted[pod.Name]; ok {
		return
	}
	if evictedPod(pod) {
		w.evicted[pod.Name] = eviction{node: pod.Spec.NodeName, at: now, createdAt: pod.CreationTimestamp.Time}
		if _, ok := w.firstEviction[pod.Spec.NodeName]; !ok {
			w.firstEviction[pod.Spec.NodeName] = now
		}
	}
}

// evictedPod: the eviction API marked the pod.
func evictedPod(pod *apiv1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == apiv1.DisruptionTarget && c.Status == apiv1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			return true
		}
	}
	return false
}

// cutSurvivors counts, per node, the pods created before the reset that
// their owner did not delete: where the workload's pods were once the cut
// was made (an evicted one counts at the node it left).
func (w *disruptWatch) cutSurvivors() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, p := range w.pods {
		if p.createdAt.Before(w.since) && !p.byOwner && p.node != "" {
			out[p.node]++
		}
	}
	return out
}

// evictedFrom counts the evictions per kind of node left: "<label> old"
// for a node that existed at the reset, "<label> new" for one created
// after it (label: the value of the node's label key).
func (w *disruptWatch) evictedFrom(key string) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, ev := range w.evicted {
		kind := w.nodeKind(ev.node, key, false)
		if ev.createdAt.After(w.since) {
			kind += ", moved before"
		}
		out[kind]++
	}
	return out
}

// nodeKind is "<label> old|new" for the node (see evictedFrom), with
// ", marked" when withMark and the node carries the consolidation mark as
// last seen; the caller holds mu.
func (w *disruptWatch) nodeKind(name, key string, withMark bool) string {
	n, ok := w.nodes[name]
	if !ok {
		return "unknown"
	}
	kind := n.labels[key] + " old"
	if n.createdAt.After(w.since) {
		kind = n.labels[key] + " new"
	}
	if withMark && n.marked {
		kind += ", marked"
	}
	return kind
}

// landings counts where the pods created since the reset were bound (the
// node's kind and mark when the watch saw the binding), all of them and
// those evicted again.
func (w *disruptWatch) landings() (all, again map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all, again = map[string]int{}, map[string]int{}
	for pod, kind := range w.landed {
		all[kind]++
		if _, ok := w.evicted[pod]; ok {
			again[kind]++
		}
	}
	return all, again
}

func (w *disruptWatch) seePDB(pdb *policyv1.PodDisruptionBudget, now time.Time) {
	if pdb.Status.ObservedGeneration < pdb.Generation || pdb.Status.ExpectedPods == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	margin := pdb.Status.CurrentHealthy - pdb.Status.DesiredHealthy
	if m, ok := w.minMargin[pdb.Name]; !ok || margin < m {
		w.minMargin[pdb.Name] = margin
	}
	if margin < 0 && now.After(w.since) {
		w.violations = append(w.violations, fmt.Sprintf("%s at +%.0fs: %d healthy of %d desired (%d allowed)",
			pdb.Name, now.Sub(w.since).Seconds(), pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy,
			pdb.Status.DisruptionsAllowed))
	}
}

// disruptFigures is one look at what the watch saw since reset.
type disruptFigures struct {
	evictions int
	// again: evicted pods created after the reset, i.e. replicas that had
	// been moved before (the workload creates no other pods then).
	again int
	// pending: pods created since the reset and not bound now;
	// longestWait: the longest any pod created since waited to be bound
	// (still waiting: until now).
	pending     int
	longestWait time.Duration
	violations  []string
	minMargin   int32
}

func (w *disruptWatch) figures(now time.Time) disruptFigures {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := disruptFigures{evictions: len(w.evicted), violations: append([]string(nil), w.violations...), minMargin: 1 << 30}
	for _, ev := range w.evicted {
		if ev.createdAt.After(w.since) {
			f.again++
		}
	}
	for name, c := range w.created {
		b, ok := w.bound[name]
		if !ok {
			if _, gone := w.evicted[name]; !gone {
				f.pending++
			}
			b = now
		}
		f.longestWait = max(f.longestWait, b.Sub(c))
	}
	for _, m := range w.minMargin {
		f.minMargin = min(f.minMargin, m)
	}
	return f
}

// firstEvictions returns the time of the first eviction from each node.
func (w *disruptWatch) firstEvictions() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.firstEviction))
	for k, v := range w.firstEviction {
		out[k] = v
	}
	return out
}

// maxUnavailablePDB is a budget allowing one of the app's pods to be
// disrupted at a time.
func maxUnavailablePDB(ns, name string) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}}
}

// sortedTimes returns the map's times in order.
func sortedTimes(m map[string]time.Time) []time.Time {
	out := make([]time.Time, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// waitPodsSettled waits until no pod of the namespace is Pending and the
// Deployments have want pods, all Ready, and says how it ended; it fails
// the benchmark if that did not happen within timeout.
func waitPodsSettled(e *framework.Env, want int, timeout time.Duration) string {
	e.T.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(e.Context(), 30*time.Second)
		pl, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Pending",
			ResourceVersion: "0"})
		ready, replicas, rerr := readyReplicas(ctx, e)
		cancel()
		pending := -1
		if err == nil {
			pending = len(pl.Items)
		}
		state := fmt.Sprintf("%d pods Pending, %d of %d pods Ready (%d replicas) after %.0fs more",
			pending, ready, want, replicas, time.Since(start).Seconds())
		if err == nil && rerr == nil && pending == 0 && ready == want && replicas == want {
			return state
		}
		if time.Since(start) > timeout {
			e.T.Errorf("not settled after %v: %s (%v %v)", timeout, state, err, rerr)
			return state
		}
		time.Sleep(5 * time.Second)
	}
}
