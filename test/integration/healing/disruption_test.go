package healing

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// driftSource proposes one node, drifted, to be replaced by one node of
// its group; an empty node proposes nothing.
type driftSource struct {
	node  atomic.Value // string
	group string
}

func (s *driftSource) Reason() disruption.Reason { return disruption.Drifted }

func (s *driftSource) Propose(context.Context, *processors.Loop) []disruption.Candidate {
	n, _ := s.node.Load().(string)
	if n == "" {
		return nil
	}
	return []disruption.Candidate{{Reason: disruption.Drifted, Nodes: []string{n},
		Replacement: []disruption.Replacement{{Group: s.group, Count: 1}}, Message: "test: its template changed"}}
}

// webPodsOn counts the pods of app web bound to node and not being deleted.
func webPodsOn(ctx context.Context, e *framework.Env, node string) (int, error) {
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// TestDisruptionSourceReplacesFirstThenDrainsByThePDB: a reason source
// given to the in-process loop proposes a drifted node with a replacement
// of its group. The engine asks for the replacement and waits for it to be
// Ready before it evicts anything; the drain moves the pods one at a time
// as their PodDisruptionBudget (minAvailable 1) allows, the eviction API
// deciding; then the node is deleted by name, and the replacement stays.
func TestDisruptionSourceReplacesFirstThenDrainsByThePDB(t *testing.T) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool, path := smallPool(e, "drift", 3)
	opts := inprocess.Options(e, path, func(o *config.Options) {
		o.NodeHealingEnabled = true // the engine runs; no node needs healing
		o.DisruptionSettleTime = 0
	})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e, clk, opts)
	if p.Loop.Disruption == nil {
		t.Fatal("no disruption engine with node healing on")
	}
	itest.Deployment(e, "web", 2, map[string]string{"pool": pool}) // both fit one 4-CPU node
	e.Eventually(30*time.Second, "both pods pending in the loop's cache", func(context.Context) (bool, error) {
		pods, err := p.Informers.Listers.Pods.Pods(e.Namespace).List(labels.Everything())
		return err == nil && len(pods) == 2, err
	})
	var old string
	e.Eventually(90*time.Second, "both pods Running on one node", func(ctx context.Context) (bool, error) {
		p.CatchUp()
		p.RunOnce()
		list, err := poolNodeList(ctx, e, pool)
		if err != nil || len(list) != 1 {
			return false, err
		}
		old = list[0].Name
		n, err := webPodsOn(ctx, e, old)
		if err != nil || n != 2 {
			return false, err
		}
		ready, err := itest.ReadyWebPods(ctx, e)
		return ready == 2, err
	})
	minReady, stopSampling := itest.WebPDBAndSampler(e)
	defer stopSampling()

	src := &driftSource{group: pool}
	src.node.Store(old)
	p.Loop.Disruption.AddSource(src)
	phase := func() string {
		s := p.Loop.Disruption.StatusSections()[disruption.StatusKey]
		for _, l := range strings.Split(s, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "phase: "); ok {
				return v
			}
		}
		return ""
	}
	p.Step(time.Second)
	p.RunOnce()
	if got := phase(); got != disruption.PhaseSurging {
		t.Fatalf("phase %q after the first loop, want Surging (the replacement asked for first)", got)
	}
	// Until the replacement is Ready, nothing is evicted.
	drainSeen := false
	e.Eventually(90*time.Second, "the drain begun once the replacement is Ready", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		if phase() == disruption.PhaseSurging {
			n, err := webPodsOn(ctx, e, old)
			if err == nil && n != 2 {
				return false, fmt.Errorf("%d pods left on %s while its replacement is not Ready: evicted too early", n, old)
			}
			return false, err
		}
		drainSeen = true
		list, err := poolNodeList(ctx, e, pool)
		if err != nil {
			return false, err
		}
		replacementReady := false
		for i := range list {
			replacementReady = replacementReady || (list[i].Name != old && nodeIsReady(&list[i]))
		}
		if !replacementReady {
			return false, fmt.Errorf("phase %s without a Ready replacement", phase())
		}
		if phase() == disruption.PhaseDraining {
			// One eviction allowed by the PDB, the other refused (429).
			n, err := webPodsOn(ctx, e, old)
			if err == nil && n != 1 {
				return false, fmt.Errorf("%d pods left on %s in the first loop of the drain, want 1 (the PDB allows one eviction)", n, old)
			}
		}
		return true, nil
	})
	if !drainSeen {
		t.Fatal("the drain was not seen")
	}
	e.Eventually(120*time.Second, "node "+old+" deleted by name", func(ctx context.Context) (bool, error) {
		p.Step(5 * time.Second)
		p.CatchUp()
		p.RunOnce()
		_, err := e.Client.CoreV1().Nodes().Get(ctx, old, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	e.Eventually(60*time.Second, "both pods Ready on the replacement", func(ctx context.Context) (bool, error) {
		n, err := itest.ReadyWebPods(ctx, e)
		return n == 2, err
	})
	if n, err := webPodsOn(e.Context(), e, old); err != nil || n != 0 {
		t.Errorf("%d pods still bound to the deleted node %s (%v)", n, old, err)
	}
	if got := minReady(); got < 1 {
		t.Errorf("Ready pods of web fell to %d during the drain: the PDB (minAvailable 1) was not honoured", got)
	}
	e.Eventually(30*time.Second, "DisruptionStarted and DisruptionSucceeded on "+old, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, old)
		return err == nil && ev["DisruptionStarted"] != "" && ev["DisruptionSucceeded"] != "", err
	})
}
