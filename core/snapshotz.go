package core

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/snapshotdump"
)

// The dump's types are package snapshotdump's (data only, so that what
// reads a dump, explain/offline, needs nothing of the loop).
type (
	DebuggingSnapshot = snapshotdump.DebuggingSnapshot
	SnapshotNode      = snapshotdump.SnapshotNode
)

// Snapshotter hands the next loop's observation to the /snapshotz requests
// waiting for it (--debugging-snapshot-enabled). A loop with no request
// waiting pays one mutex.
type Snapshotter struct {
	mu      sync.Mutex
	waiters []chan *DebuggingSnapshot
}

// NewSnapshotter returns a Snapshotter with no request waiting.
func NewSnapshotter() *Snapshotter { return &Snapshotter{} }

// WithSnapshotObjects makes each snapshot carry the objects f lists
// (DaemonSets, PDBs, controllers), so that an offline explain drains and
// builds templates as the loop did.
func WithSnapshotObjects(f func() (*SnapshotObjects, error)) AutoscalerOption {
	return func(a *Autoscaler) { a.snapshotObjects = f }
}

// WithSnapshotter makes the loop feed s.
func WithSnapshotter(s *Snapshotter) AutoscalerOption { return func(a *Autoscaler) { a.snapshots = s } }

func (s *Snapshotter) wanted() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters) > 0
}

func (s *Snapshotter) deliver(snap *DebuggingSnapshot) {
	s.mu.Lock()
	waiters := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	for _, w := range waiters {
		w <- snap // buffered: a request that gave up does not block the loop
	}
}

// ServeHTTP answers GET /snapshotz with the snapshot of the next loop that
// starts, as JSON; 504 when none ran before the request's deadline (or
// two minutes).
func (s *Snapshotter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	ch := make(chan *DebuggingSnapshot, 1)
	s.mu.Lock()
	s.waiters = append(s.waiters, ch)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	select {
	case snap := <-ch:
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(snap); err != nil {
			klog.FromContext(r.Context()).Error(err, "Writing the debugging snapshot")
		}
	case <-ctx.Done():
		s.mu.Lock()
		for i, c := range s.waiters {
			if c == ch {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		http.Error(w, "no loop ran before the deadline", http.StatusGatewayTimeout)
	}
}

// snapshot builds the debugging snapshot of obs: nodes with their pods,
// each group's template node, the pending pods.
func (a *Autoscaler) snapshot(ctx context.Context, obs *Observation, start time.Time) *DebuggingSnapshot {
	snap := &DebuggingSnapshot{StartTimestamp: start, TemplateNodes: map[string]*SnapshotNode{}, PendingPods: obs.PendingPods}
	byNode := map[string]*SnapshotNode{}
	for _, n := range obs.Nodes {
		sn := &SnapshotNode{Node: n, Pods: []*apiv1.Pod{}}
		byNode[n.Name] = sn
		snap.NodeList = append(snap.NodeList, sn)
	}
	for _, p := range obs.ScheduledPods {
		if sn := byNode[p.Spec.NodeName]; sn != nil {
			sn.Pods = append(sn.Pods, p)
		}
	}
	sort.Slice(snap.NodeList, func(i, j int) bool { return snap.NodeList[i].Node.Name < snap.NodeList[j].Node.Name })
	for _, g := range obs.NodeGroups {
		ni, err := g.TemplateNodeInfo(ctx)
		if err != nil || ni == nil || ni.Node == nil {
			// Groups without a provider template are scaled from a copy of
			// one of their nodes, which NodeList already shows.
			continue
		}
		snap.TemplateNodes[g.Id()] = &SnapshotNode{Node: ni.Node, Pods: append([]*apiv1.Pod{}, ni.Pods...),
			ResourceSlices: ni.ResourceSlices}
	}
	a.snapshotCloud(ctx, obs, snap)
	if a.snapshotObjects != nil {
		objects, err := a.snapshotObjects()
		if err != nil {
			snap.Error = fmt.Sprintf("listing the objects of the snapshot: %v", err)
		}
		snap.Objects = objects
	}
	snap.EndTimestamp = a.clock.Now()
	return snap
}
