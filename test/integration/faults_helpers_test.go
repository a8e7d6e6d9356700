package integration

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// LongEnv runs the long variants of the reliability tests (see
// docs/reliability.md) when set to a non-empty value.
const LongEnv = "RELIABILITY_LONG"

func skipUnlessLong(t *testing.T) {
	t.Helper()
	if os.Getenv(LongEnv) == "" {
		t.Skipf("a long variant: set %s=1 to run it", LongEnv)
	}
}

// nodeDeletion is one Node deletion a deletionWatch saw.
type nodeDeletion struct {
	name, pool string
	at         time.Time
	// ready: the Node was Ready when deleted; busy lists the test's pods
	// Running on it then.
	ready bool
	busy  []string
}

// deletionWatch records every deletion of the test's Nodes, with whether
// the Node was Ready and which of the test's pods ran on it at that moment.
type deletionWatch struct {
	mu        sync.Mutex
	deletions []nodeDeletion
	pods      cache.Indexer
}

func watchNodeDeletions(e *framework.Env) *deletionWatch {
	e.T.Helper()
	w := &deletionWatch{}
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
			d := nodeDeletion{name: n.Name, pool: n.Labels["pool"], at: time.Now(), ready: nodeReady(n)}
			for _, o := range w.pods.List() {
				if p := o.(*apiv1.Pod); p.Spec.NodeName == n.Name && p.Status.Phase == apiv1.PodRunning {
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

// all returns the deletions seen so far.
func (w *deletionWatch) all() []nodeDeletion {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]nodeDeletion(nil), w.deletions...)
}

// busy returns the deletions of Nodes that ran one of the test's pods.
func (w *deletionWatch) busy() []nodeDeletion {
	var out []nodeDeletion
	for _, d := range w.all() {
		if len(d.busy) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func (d nodeDeletion) String() string {
	return fmt.Sprintf("%s (pool %s, ready %v, running %v)", d.name, d.pool, d.ready, d.busy)
}

// countMatches counts the lines of log that contain every one of parts.
func countMatches(log string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
}

var lastActivityRE = regexp.MustCompile(`cluster_autoscaler_last_activity\{activity="mainSuccessful"\} (\S+)`)

// lastSuccessfulLoop reads when the autoscaler last finished a loop
// without error, from its /metrics.
func lastSuccessfulLoop(t *testing.T, p *autoscalerProcess) time.Time {
	t.Helper()
	_, body, err := p.get(t.Context(), "/metrics")
	if err != nil {
		return time.Time{}
	}
	m := lastActivityRE.FindStringSubmatch(body)
	if m == nil {
		return time.Time{}
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(v*1e9))
}
