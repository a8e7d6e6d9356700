package itest

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// NodeDeletion is one Node deletion a deletionWatch saw.
type NodeDeletion struct {
	name, Pool string
	at         time.Time
	// Ready: the Node was Ready when deleted; busy lists the test's pods
	// Running on it then.
	Ready bool
	busy  []string
}

// DeletionWatch records every deletion of the test's Nodes, with whether
// the Node was Ready and which of the test's pods ran on it at that moment.
type DeletionWatch struct {
	mu        sync.Mutex
	deletions []NodeDeletion
	pods      cache.Indexer
}

// WatchNodeDeletions starts recording every deletion of the test's Nodes until the test ends.
func WatchNodeDeletions(e *framework.Env) *DeletionWatch {
	e.T.Helper()
	w := &DeletionWatch{}
	nodes := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithTweakListOptions(
		func(o *metav1.ListOptions) { o.LabelSelector = framework.TestNamespaceLabel + "=" + e.Namespace }))
	pods := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(e.Namespace))
	podInformer := pods.Core().V1().Pods().Informer()
	w.pods = podInformer.GetIndexer()
	if _, err := nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			n, ok := obj.(*apiv1.Node)
			if !ok {
				return
			}
			d := NodeDeletion{name: n.Name, Pool: n.Labels["pool"], at: time.Now(), Ready: NodeReady(n)}
			// The pods as the API server has them now: after a
			// kube-apiserver restart the informer's cache may lag behind
			// by seconds (its watch backs off) and still show a pod
			// evicted and gone. The cache only when the API does not
			// answer.
			var bound []*apiv1.Pod
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
			cancel()
			if err == nil {
				for i := range list.Items {
					bound = append(bound, &list.Items[i])
				}
			} else {
				for _, o := range w.pods.List() {
					bound = append(bound, o.(*apiv1.Pod))
				}
			}
			for _, p := range bound {
				if p.Spec.NodeName == n.Name && p.Status.Phase == apiv1.PodRunning {
					d.busy = append(d.busy, p.Name)
				}
			}
			w.mu.Lock()
			w.deletions = append(w.deletions, d)
			w.mu.Unlock()
		},
	}); err != nil {
		e.T.Fatal(err)
	}
	stop := make(chan struct{})
	e.T.Cleanup(func() { close(stop) })
	nodes.Start(stop)
	pods.Start(stop)
	nodes.WaitForCacheSync(stop)
	pods.WaitForCacheSync(stop)
	return w
}

// All returns the deletions seen so far.
func (w *DeletionWatch) All() []NodeDeletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]NodeDeletion(nil), w.deletions...)
}

// Busy returns the deletions of Nodes that ran one of the test's pods.
func (w *DeletionWatch) Busy() []NodeDeletion {
	var out []NodeDeletion
	for _, d := range w.All() {
		if len(d.busy) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func (d NodeDeletion) String() string {
	return fmt.Sprintf("%s (pool %s, ready %v, running %v)", d.name, d.Pool, d.Ready, d.busy)
}
