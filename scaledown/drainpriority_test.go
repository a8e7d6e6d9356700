package scaledown

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

func prioPod(name string, prio int32, grace int64) *apiv1.Pod {
	p := pod(name, "a", "100m")
	p.Spec.Priority = &prio
	p.Spec.TerminationGracePeriodSeconds = &grace
	return p
}

func TestEvictionRounds(t *testing.T) {
	prios, err := config.ParseDrainPriorityConfig("10000:20,1000:100,0:60")
	if err != nil {
		t.Fatal(err)
	}
	pods := []*apiv1.Pod{prioPod("neg", -5, 30), prioPod("zero", 0, 30), prioPod("mid", 999, 30),
		prioPod("edge", 1000, 30), prioPod("high", 5000, 30), prioPod("top", 2000000000, 30)}
	pods = append(pods, pod("nil-priority", "a", "1"))
	type round struct {
		Pods  []string
		Grace int64
	}
	summary := func(rs []evictionRound) []round {
		var out []round
		for _, r := range rs {
			var names []string
			for _, p := range r.pods {
				names = append(names, p.Name)
			}
			out = append(out, round{names, r.grace})
		}
		return out
	}
	want := []round{{[]string{"neg", "zero", "mid", "nil-priority"}, 60}, {[]string{"edge", "high"}, 100}, {[]string{"top"}, 20}}
	if diff := cmp.Diff(want, summary(evictionRounds(pods, prios, 600))); diff != "" {
		t.Errorf("rounds (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]round{{[]string{"neg", "zero"}, 600}}, summary(evictionRounds(pods[:2], nil, 600))); diff != "" {
		t.Errorf("without the flag (-want +got):\n%s", diff)
	}
}

// With --drain-priority-config, the low-priority pods are evicted (with
// their group's grace period, or their own when shorter) and gone before
// the higher ones are evicted.
func TestDrainPriorityOrder(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": ""}, func(o *Options) {
		o.DrainPriorityConfig = "1000:7,0:3"
	})
	pods := []*apiv1.Pod{prioPod("high", 2000, 30), prioPod("low", 0, 30), prioPod("low-short", 10, 1)}
	for _, p := range pods {
		if _, err := f.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []string
	podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	f.client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		ev := action.(clienttesting.CreateAction).GetObject().(*policyv1.Eviction)
		mu.Lock()
		defer mu.Unlock()
		left := 0
		for _, name := range []string{"low", "low-short"} {
			if _, err := f.client.Tracker().Get(podsGVR, "default", name); err == nil {
				left++
			}
		}
		got = append(got, fmt.Sprintf("%s grace=%d lowLeft=%d", ev.Name, *ev.DeleteOptions.GracePeriodSeconds, left))
		_ = f.client.Tracker().Delete(podsGVR, "default", ev.Name)
		return true, nil, nil
	})
	if err := a.evictAll(context.Background(), pods); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[2] != "high grace=7 lowLeft=0" {
		t.Fatalf("evictions %v, want the low ones first and high last, after they were gone", got)
	}
	lows := map[string]bool{got[0]: true, got[1]: true}
	if !lows["low grace=3 lowLeft=2"] && !lows["low grace=3 lowLeft=1"] {
		t.Errorf("low evicted as %v, want grace 3", got[:2])
	}
	if !lows["low-short grace=1 lowLeft=2"] && !lows["low-short grace=1 lowLeft=1"] {
		t.Errorf("low-short evicted as %v, want its own grace 1", got[:2])
	}
}
