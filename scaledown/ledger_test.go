package scaledown

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recordingLedger holds back the nodes in hold and records what it is told.
type recordingLedger struct {
	hold map[string]string
	mu   sync.Mutex
	log  []string
}

func (l *recordingLedger) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, s)
}

func (l *recordingLedger) Admit(_ context.Context, _ time.Time, rs []LedgerRemoval, atomic bool) map[string]string {
	held := map[string]string{}
	for _, r := range rs {
		if why := l.hold[r.Node]; why != "" {
			held[r.Node] = why
			continue
		}
		l.add("admit " + r.Node + " " + r.Reason)
	}
	return held
}

func (l *recordingLedger) Phase(node, phase string, _ time.Time) { l.add(node + " " + phase) }
func (l *recordingLedger) Ended(node, outcome string)            { l.add(node + " " + outcome) }

// of returns what the ledger was told about node, in order.
func (l *recordingLedger) of(node string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.log {
		if strings.HasPrefix(s, node+" ") || strings.HasPrefix(s, "admit "+node+" ") {
			out = append(out, s)
		}
	}
	return out
}

// TestLedgerAdmitsAndFollowsRemovals: a node the ledger holds back is not
// touched (no taint, no deletion); the others are told through their
// phases to their end: deleted, or cancelled when a pod was bound meanwhile.
func TestLedgerAdmitsAndFollowsRemovals(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": "", "b": "", "c": "1", "d": ""}, func(o *Options) {
		o.NodeDeleteDelayAfterTaint = time.Second
	})
	l := &recordingLedger{hold: map[string]string{"a": "the disruption engine is removing it"}}
	a.ledger = l
	cs := f.candidates(t)
	if n := a.Remove(context.Background(), cs); n != 3 {
		t.Fatalf("started %d removals, want 3 (b, c, d)", n)
	}
	waitFor(t, "d tainted", func() bool { return f.hasToBeDeleted(t, "d") })
	if _, err := f.client.CoreV1().Pods("default").Create(context.Background(), pod("late", "d", "1"),
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a)
	if f.hasToBeDeleted(t, "a") {
		t.Error("the node the ledger held back was tainted")
	}
	var deleted []string
	for _, call := range f.deleteCalls() {
		deleted = append(deleted, call...)
	}
	sort.Strings(deleted)
	if diff := cmp.Diff([]string{"b", "c"}, deleted); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	for node, want := range map[string][]string{
		"a": nil,
		"b": {"admit b empty", "b Draining", "b Deleting", "b deleted"},
		"c": {"admit c underutilized", "c Draining", "c Deleting", "c deleted"},
		"d": {"admit d empty", "d Draining", "d cancelled"},
	} {
		if diff := cmp.Diff(want, l.of(node)); diff != "" {
			t.Errorf("ledger of %s (-want +got):\n%s", node, diff)
		}
	}
}

// TestLedgerKeepsInterruptedRemovals: a removal its context cut short (the
// lease lost) is not told ended: it stays on record for the next leader; a
// drain that failed is told failed.
func TestLedgerKeepsInterruptedRemovals(t *testing.T) {
	f, a := actuatorFixture(t, 0, map[string]string{"a": "1"}, func(o *Options) {
		o.MaxPodEvictionTime = time.Hour
	})
	evictions := make(chan struct{}, 1000)
	f.refuseEvictions(apierrors.NewTooManyRequests("a PDB refuses", 1), evictions)
	l := &recordingLedger{}
	a.ledger = l
	ctx, cancel := context.WithCancel(context.Background())
	a.Remove(ctx, f.candidates(t))
	<-evictions
	cancel()
	waitDone(t, a)
	if diff := cmp.Diff([]string{"admit a underutilized", "a Draining"}, l.of("a")); diff != "" {
		t.Errorf("ledger of a (-want +got):\n%s", diff)
	}

	f, a = actuatorFixture(t, 0, map[string]string{"a": "1"}, func(o *Options) {
		o.MaxPodEvictionTime = 200 * time.Millisecond
	})
	f.refuseEvictions(apierrors.NewTooManyRequests("a PDB refuses", 1), nil)
	l = &recordingLedger{}
	a.ledger = l
	a.Remove(context.Background(), f.candidates(t))
	waitDone(t, a)
	if diff := cmp.Diff([]string{"admit a underutilized", "a Draining", "a failed"}, l.of("a")); diff != "" {
		t.Errorf("ledger of a after a failed drain (-want +got):\n%s", diff)
	}
}
