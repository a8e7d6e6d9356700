package interruption

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// Actions of the notices metric (besides the provider's own for the
// messages it drops: foreign, ignored, malformed, unknown).
const (
	// ActionReceived: a notice for an instance of a managed group came.
	ActionReceived = "received"
	// ActionDisrupted: its node is being disrupted for it (acknowledged).
	ActionDisrupted = "disrupted"
	// ActionGone: no Node is the instance any more (acknowledged).
	ActionGone = "gone"
)

// DefaultPollInterval is how long Run waits between two polls.
const DefaultPollInterval = time.Second

// Source is the interrupted reason's source.
type Source struct {
	src      cloudprovider.InterruptionSource
	provider cloudprovider.CloudProvider
	every    time.Duration
	notices  *prometheus.CounterVec

	mu       sync.Mutex
	inFlight func() map[string]disruption.Reason
	pending  []cloudprovider.InterruptionNotice
	seen     map[string]bool   // notices counted as received
	acks     map[string]string // notice ID -> action, to send
	// proposed are the notices the last Propose made candidates of, with
	// their node: Poll acknowledges those whose node the engine has in
	// flight for this reason (asked there, not in Propose, which the
	// engine calls holding the lock InFlight takes).
	proposed map[string]proposedNotice
}

type proposedNotice struct {
	notice cloudprovider.InterruptionNotice
	node   string
}

var _ disruption.Source = (*Source)(nil)

// Option configures a Source.
type Option func(*Source)

// WithPollInterval sets the wait between two polls.
func WithPollInterval(d time.Duration) Option {
	return func(s *Source) {
		if d > 0 {
			s.every = d
		}
	}
}

// WithInFlight tells the source which nodes the engine is disrupting (the
// engine's InFlight); without it no notice is taken as acted on until its
// node is gone.
func WithInFlight(f func() map[string]disruption.Reason) Option {
	return func(s *Source) { s.inFlight = f }
}

// New returns the source over src, matching instances to Nodes the way
// provider does; reg (may be nil) gets cluster_autoscaler_interruption_notices_total.
func New(src cloudprovider.InterruptionSource, provider cloudprovider.CloudProvider, reg prometheus.Registerer, opts ...Option) *Source {
	s := &Source{src: src, provider: provider, every: DefaultPollInterval, seen: map[string]bool{}, acks: map[string]string{},
		proposed: map[string]proposedNotice{},
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "cluster_autoscaler", Name: "interruption_notices_total",
			Help: "Interruption notices (and queue messages) by kind and by what was done with them."}, []string{"kind", "action"})}
	if reg != nil {
		if err := reg.Register(s.notices); err != nil {
			klog.ErrorS(err, "Registering the interruption notices metric")
		}
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// SetInFlight is WithInFlight after construction (the engine is built
// after its sources).
func (s *Source) SetInFlight(f func() map[string]disruption.Reason) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight = f
}

// Reason implements disruption.Source.
func (s *Source) Reason() disruption.Reason { return disruption.Interrupted }

// Run polls until ctx ends: each poll sends the acknowledgements decided
// since the last, reads the provider's notices, counts them, and calls
// trigger when a notice not seen before came (the loop acts on it at
// once rather than at the next scan interval).
func (s *Source) Run(ctx context.Context, trigger func()) {
	logger := klog.FromContext(ctx).WithName("interruption")
	ctx = klog.NewContext(ctx, logger)
	for {
		if s.Poll(ctx) && trigger != nil {
			trigger()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.every):
		}
	}
}

// Poll is one round of Run; it reports whether a new notice came.
func (s *Source) Poll(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	s.ackInFlight()
	s.mu.Lock()
	acks := s.acks
	s.acks = map[string]string{}
	s.mu.Unlock()
	if len(acks) > 0 {
		ids := make([]string, 0, len(acks))
		for id := range acks {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if err := s.src.AckInterruptions(ctx, ids); err != nil {
			logger.Error(err, "Acknowledging interruption notices; the provider retries the deletions")
		}
	}
	pending, dropped, err := s.src.PollInterruptions(ctx)
	if err != nil {
		logger.Error(err, "Reading interruption notices")
	}
	for _, d := range dropped {
		s.notices.WithLabelValues(d.Kind, d.Action).Inc()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fresh := false
	keep := pending[:0:0]
	for _, n := range pending {
		if _, acked := acks[n.ID]; acked {
			continue // acknowledged just now; the provider forgets it
		}
		keep = append(keep, n)
		if !s.seen[n.ID] {
			s.seen[n.ID] = true
			fresh = true
			s.notices.WithLabelValues(string(n.Kind), ActionReceived).Inc()
		}
	}
	s.pending = keep
	if err == nil {
		// Only what is still pending can come again: the rest was
		// acknowledged, and seen does not grow with every notice ever read.
		for id := range s.seen {
			if !slices.ContainsFunc(keep, func(n cloudprovider.InterruptionNotice) bool { return n.ID == id }) {
				delete(s.seen, id)
			}
		}
	}
	return fresh
}

// Propose implements disruption.Source: one candidate per notice whose
// instance is surely a Node of a managed group, that Node replaced by one
// node of its group, the earliest deadline first. Notices whose node is in
// flight for this reason, or whose instance has no Node any more, are
// acknowledged (by the next poll).
func (s *Source) Propose(ctx context.Context, loop *processors.Loop) []disruption.Candidate {
	logger := klog.FromContext(ctx)
	s.mu.Lock()
	pending := append([]cloudprovider.InterruptionNotice(nil), s.pending...)
	s.mu.Unlock()
	proposedNow := map[string]proposedNotice{}
	defer func() {
		s.mu.Lock()
		s.proposed = proposedNow
		s.mu.Unlock()
	}()
	if len(pending) == 0 {
		return nil
	}
	listed := map[string][]cloudprovider.Instance{}
	for _, g := range loop.NodeGroups {
		ins, err := g.Nodes(ctx)
		if err != nil {
			logger.V(2).Info("Interruption notices of a node group wait: its instances are unknown", "nodeGroup", g.Id(), "err", err)
			continue
		}
		listed[g.Id()] = ins
	}
	ids := cloudprovider.Identify(ctx, s.provider, loop.Nodes, listed)
	avoided := s.avoidedGroups(loop.Now)
	sort.SliceStable(pending, func(i, j int) bool { return earlier(pending[i], pending[j]) })
	var out []disruption.Candidate
	proposed := map[string]bool{}
	for _, n := range pending {
		node, m := ids.NodeOf(n.Instance)
		switch {
		case m == cloudprovider.NoMatch:
			logger.Info("Interruption notice acknowledged: no Node is the instance (gone)", "instance", n.Instance, "kind", n.Kind)
			s.ack(n, ActionGone)
			continue
		case m != cloudprovider.SureMatch:
			logger.V(4).Info("Interruption notice waits: a Node may be the instance, not surely", "instance", n.Instance, "node", node)
			continue
		}
		proposedNow[n.ID] = proposedNotice{notice: n, node: node}
		if proposed[node] {
			continue
		}
		proposed[node] = true
		c := disruption.Candidate{Reason: disruption.Interrupted, Nodes: []string{node},
			Replacement: []disruption.Replacement{{Group: n.Group, Count: 1}}, Message: message(n)}
		if a, ok := avoided[n.Group]; ok {
			// Its group is held backed off: the node goes without a
			// replacement from it, and its pods, once evicted, get
			// capacity from the scale-up, which picks another group.
			c.Replacement = nil
			c.Message += fmt.Sprintf("; no replacement from node group %s, avoided until %s (%s): its pods go to other capacity",
				n.Group, a.Until.UTC().Format(time.RFC3339), a.ErrorCode)
			logger.Info("Interrupted node's group is avoided: no replacement asked of it", "node", node, "nodeGroup", n.Group,
				"errorCode", a.ErrorCode, "until", a.Until)
		}
		out = append(out, c)
	}
	return out
}

// avoidedGroups are the groups the provider avoids at now
// (cloudprovider.CapacityAvoider), by id; none when it avoids none.
func (s *Source) avoidedGroups(now time.Time) map[string]cloudprovider.AvoidedGroup {
	a, ok := s.provider.(cloudprovider.CapacityAvoider)
	if !ok {
		return nil
	}
	out := map[string]cloudprovider.AvoidedGroup{}
	for _, g := range a.AvoidedGroups(now) {
		out[g.Group] = g
	}
	return out
}

// ackInFlight acknowledges the notices proposed whose node the engine has
// in flight for the interrupted reason.
func (s *Source) ackInFlight() {
	s.mu.Lock()
	f := s.inFlight
	proposed := make([]proposedNotice, 0, len(s.proposed))
	for _, p := range s.proposed {
		proposed = append(proposed, p)
	}
	s.mu.Unlock()
	if f == nil || len(proposed) == 0 {
		return
	}
	inFlight := f()
	for _, p := range proposed {
		if inFlight[p.node] == disruption.Interrupted {
			s.ack(p.notice, ActionDisrupted)
		}
	}
}

func (s *Source) ack(n cloudprovider.InterruptionNotice, action string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.acks[n.ID]; ok {
		return
	}
	s.acks[n.ID] = action
	s.notices.WithLabelValues(string(n.Kind), action).Inc()
}

// earlier orders notices by deadline (none last), then by time.
func earlier(a, b cloudprovider.InterruptionNotice) bool {
	switch {
	case a.Deadline.IsZero() != b.Deadline.IsZero():
		return !a.Deadline.IsZero()
	case !a.Deadline.Equal(b.Deadline):
		return a.Deadline.Before(b.Deadline)
	}
	return a.Time.Before(b.Time)
}

func message(n cloudprovider.InterruptionNotice) string {
	msg := fmt.Sprintf("%s: %s", n.Kind, n.Detail)
	if n.InstanceType != "" || n.Zone != "" {
		msg += fmt.Sprintf(" (%s in %s)", n.InstanceType, n.Zone)
	}
	if !n.Deadline.IsZero() {
		msg += ", by " + n.Deadline.UTC().Format(time.RFC3339)
	}
	return msg
}
