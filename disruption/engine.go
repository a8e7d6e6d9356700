package disruption

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/processors"
)

// scaleDownDisabled is upstream's annotation that keeps scale-down off a
// node; a node being disrupted carries it so that only the engine removes
// it, and a node that carries it otherwise is protected from the voluntary
// reasons.
const scaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

// Options configure the Engine. The healing ones (Policies to HookWait)
// keep the meaning they had in package healing; they apply to the
// Unhealthy reason only.
type Options struct {
	// Healing turns the Unhealthy reason on: the nodes the Policies or the
	// heal annotation name are healed.
	Healing  bool
	Policies []Policy
	Hooks    []Hook
	// MaxConcurrent heals in flight at once.
	MaxConcurrent int
	// Cooldown: a node healed (or whose heal failed) is not healed again
	// before this has passed; a node whose disruption for another reason
	// failed or was cancelled is not proposed again for that reason before
	// this has passed.
	Cooldown time.Duration
	// MaxUnhealthyPercent: when more than this share of a group's nodes
	// (or of the cluster's) need healing at once, that is an outage, not a
	// node fault, and none of them is healed. One node alone always may be.
	// It is the Unhealthy reason's budget.
	MaxUnhealthyPercent float64
	DryRun              bool
	// ReplaceFirst asks for the replacement before removing the node when
	// the group is below its max size, so capacity never dips (heals; the
	// other reasons always replace first).
	ReplaceFirst       bool
	MaxPodEvictionTime time.Duration
	// MaxNodeProvisionTime bounds the waits of a plan (the replacement, the
	// provider, an instance going) and is the grace of a new node: a node
	// younger than this is not healed for its Ready condition.
	MaxNodeProvisionTime time.Duration
	// HookWait is the longest one loop waits for the hooks of a heal's
	// phase (default 1s); slower hooks go on outside the loop and the heal
	// waits in its phase for their answer.
	HookWait time.Duration
	// Namespace holds the state ConfigMap.
	Namespace string

	// Sources are asked once per loop, in Repair.
	Sources []Source
	// Budget says how many nodes of a group may start being disrupted for
	// a reason other than Unhealthy; nil: DefaultBudget.
	Budget Budget
	// Protected, when set, protects more nodes from the voluntary reasons
	// (ProvisioningRequest bookings), with why.
	Protected func(nodeName string) (bool, string)
	// SettleTime: nodes younger than this are protected from the voluntary
	// reasons.
	SettleTime time.Duration
	// ReplacementHealth, when set, says which node groups fail to give
	// capacity: a voluntary plan does not ask a group backed off (it waits
	// for the back-off to end), and a plan waiting for its replacement in
	// Surging stops waiting once the group asked failed since the ask
	// (as after --max-node-provision-time, only sooner). Nil: neither.
	ReplacementHealth ReplacementHealth
	// Readiness, when set, keeps a replacement whose Ready condition is
	// true from counting as Ready while the cluster state does not judge
	// it ready (a startup taint; its devices, DRA ResourceSlices or GPU
	// extended resources, not published). Nil: the condition alone counts.
	Readiness Readiness
}

// Engine removes and replaces nodes for every reason; it is a
// processors.RepairProcessor.
type Engine struct {
	opts     Options
	client   kubernetes.Interface
	provider cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.PassiveClock
	store    *store
	metrics  *healMetrics
	dm       *disruptionMetrics
	hooks    *hookRunner
	budget   Budget
	// mu guards st against StatusSections, called by the status writer.
	mu sync.Mutex
	// st is the state as last written (or read at the first loop); a
	// failed write keeps it and is retried, a conflict (another writer)
	// drops it and the next loop reads the ConfigMap again.
	st *state
	// unsaved: the last write of st failed (not a conflict): the next loop
	// writes st again even when it changes nothing in it, or a plan that
	// ended in the failed write's loop would stay in the ConfigMap.
	unsaved bool
	// assigned is this loop's replacement nodes per replacement
	// (assignReplacements).
	assigned map[*replacement]int
	// offersMu guards offers and sources.
	offersMu sync.Mutex
	offers   map[Reason][]Candidate
	sources  []Source
	// held are the candidates that waited in the last loop for a backed-off
	// replacement group (holdBackedOff), by reason and nodes: each is told
	// once per wait.
	held map[string]string
	// rmu guards rm, scale-down's removals (deleteonly.go): its actuator
	// reports them from its own goroutines. Lock order: mu, then rmu.
	rmu sync.Mutex
	rm  removals
}

var _ processors.RepairProcessor = (*Engine)(nil)

// New returns an Engine; reg (may be nil) gets its metrics.
func New(opts Options, client kubernetes.Interface, provider cloudprovider.CloudProvider, recorder record.EventRecorder,
	reg prometheus.Registerer) *Engine {
	if opts.MaxConcurrent < 1 {
		opts.MaxConcurrent = 1
	}
	if opts.HookWait <= 0 {
		opts.HookWait = time.Second
	}
	m := newHealMetrics(reg)
	hooks := &hookRunner{observe: func(phase string, took time.Duration, err error) {
		result := "ok"
		if err != nil {
			result = "failed"
		}
		m.hooks.WithLabelValues(phase, result).Observe(took.Seconds())
	}}
	b := opts.Budget
	if b == nil {
		b = DefaultBudget{}
	}
	return &Engine{opts: opts, client: client, provider: provider, recorder: recorder, clock: clock.RealClock{},
		store: &store{client: client, namespace: opts.Namespace}, metrics: m, dm: newDisruptionMetrics(reg), hooks: hooks,
		budget: b, offers: map[Reason][]Candidate{}, sources: append([]Source(nil), opts.Sources...), rm: newRemovals()}
}

// AddSource adds a source asked in every Repair from now on.
func (h *Engine) AddSource(s Source) {
	h.offersMu.Lock()
	defer h.offersMu.Unlock()
	h.sources = append(h.sources, s)
}

// Offer hands the engine the candidates of a source that runs elsewhere in
// the loop (the consolidation planner beside scale-down): it replaces the
// previous offer of that reason and is consumed at the next Repair.
//
// A source (asked or offering) must go on proposing the nodes of a plan in
// flight (they carry the Taint, cordoned) while its reason holds: until its
// drain begins, a voluntary plan whose nodes the source's latest answer
// leaves out is cancelled. A reason with no answer in a loop (no offer since
// the last Repair) re-checks nothing.
func (h *Engine) Offer(reason Reason, cands []Candidate) {
	h.offersMu.Lock()
	defer h.offersMu.Unlock()
	h.offers[reason] = append([]Candidate{}, cands...)
}

// proposals is one loop's candidates by reason; fresh names the reasons
// whose source answered in this loop (a source asked, or an offer made
// since the last Repair): only those are re-checked.
type proposals struct {
	by    map[Reason][]Candidate
	fresh map[Reason]bool
}

// proposed reports whether the reason's source, when it answered in this
// loop, still proposes every node of r.
func (p proposals) proposed(r *plan) bool {
	if !p.fresh[r.For] {
		return true
	}
	for _, m := range r.Nodes {
		if !p.proposes(r.For, m.Node) {
			return false
		}
	}
	return true
}

// proposes reports whether some candidate of the reason names node.
func (p proposals) proposes(reason Reason, node string) bool {
	for _, c := range p.by[reason] {
		for _, n := range c.Nodes {
			if n == node {
				return true
			}
		}
	}
	return false
}

func (h *Engine) propose(ctx context.Context, loop *processors.Loop) proposals {
	h.offersMu.Lock()
	offers, sources := h.offers, append([]Source(nil), h.sources...)
	h.offers = map[Reason][]Candidate{}
	h.offersMu.Unlock()
	p := proposals{by: map[Reason][]Candidate{}, fresh: map[Reason]bool{}}
	add := func(r Reason, cands []Candidate) {
		p.fresh[r] = true
		for _, c := range cands {
			if c.Reason == "" {
				c.Reason = r
			}
			if c.Reason == r && len(c.Nodes) > 0 {
				p.by[r] = append(p.by[r], c)
			}
		}
	}
	for r, cands := range offers {
		add(r, cands)
	}
	for _, s := range sources {
		add(s.Reason(), s.Propose(ctx, loop))
	}
	return p
}

// Repair advances the plans in flight and starts new ones. It reports a
// change (ending the loop) only when it changed a node group's size.
func (h *Engine) Repair(ctx context.Context, loop *processors.Loop) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	logger := klog.FromContext(ctx).WithName("disruption")
	ctx = klog.NewContext(ctx, logger)
	props := h.propose(ctx, loop)
	if lb, ok := h.budget.(LoopBudget); ok {
		lb.Refresh(ctx, loop.Now)
	}
	if h.st == nil {
		st, err := h.store.load(ctx)
		if err != nil {
			logger.Error(err, "Disruptions (node healing included) skipped this loop")
			return false
		}
		h.st = st
		h.importRemovals(st)
	}
	st := h.st
	defer h.observe(st)
	save := func() bool {
		err := h.store.save(ctx, st)
		h.unsaved = err != nil
		if err == nil {
			return true
		}
		logger.Error(err, "Recording the disruption state; retrying in the next loop")
		if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
			h.st, h.unsaved = nil, false
		}
		return false
	}
	now := loop.Now
	for n, until := range st.Cooldown {
		if now.After(until) {
			delete(st.Cooldown, n)
		}
	}
	nodes := map[string]*apiv1.Node{}
	for _, n := range loop.Nodes {
		nodes[n.Name] = n
	}
	// New plans are recorded before anything is done for them, then every
	// plan in flight moves on; the state is written after each step. A
	// write that failed in the last loop is made again here, whether or not
	// anything is in flight.
	started := h.start(ctx, st, loop, props)
	settled := h.settleLeftRemovals(ctx, nodes, now)
	if (h.exportRemovals(st) || started || settled || h.unsaved) && !save() {
		return false
	}
	h.assigned = h.assignReplacements(ctx, st, loop)
	changed := false
	names := make([]string, 0, len(st.Heals))
	for n := range st.Heals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if h.advance(ctx, st, st.Heals[name], nodes, loop, props, save) {
			changed = true
		}
		if !save() {
			return changed
		}
	}
	return changed
}

// trigger says why n needs healing, if it does.
func (h *Engine) trigger(n *apiv1.Node, now time.Time) (kind, reason string, ok bool) {
	if v, ok := n.Annotations[Annotation]; ok {
		if v == "" {
			v = "requested"
		}
		return "annotation", v, true
	}
	for _, p := range h.opts.Policies {
		for _, c := range n.Status.Conditions {
			if c.Type == p.Type && c.Status == p.Status && now.Sub(c.LastTransitionTime.Time) >= p.For {
				return string(p.Type), fmt.Sprintf("condition %s=%s for %v or more", p.Type, p.Status, p.For), true
			}
		}
	}
	return "", "", false
}

func (h *Engine) event(r *plan, typ, reason, format string, args ...any) {
	for _, m := range r.Nodes {
		ref := &apiv1.ObjectReference{Kind: "Node", Name: m.Node}
		h.recorder.Eventf(ref, typ, reason, format, args...)
	}
}

// StatusKey is the status ConfigMap key of the plans in flight.
const StatusKey = "healing"

// StatusSections is the status ConfigMap's healing key: every plan in
// flight with its phase (empty when none, which removes the key).
func (h *Engine) StatusSections() map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rmu.Lock()
	removals := h.removalsLocked()
	h.rmu.Unlock()
	if (h.st == nil || len(h.st.Heals) == 0) && len(removals) == 0 {
		return map[string]string{StatusKey: ""}
	}
	type line struct {
		Node       string   `json:"node"`
		NodeGroup  string   `json:"nodeGroup"`
		Disruption Reason   `json:"disruption"`
		Nodes      []string `json:"nodes,omitempty"`
		Phase      string   `json:"phase"`
		PhaseSince string   `json:"phaseSince"`
		Started    string   `json:"started"`
		Reason     string   `json:"reason"`
	}
	var out []line
	for _, r := range removals {
		out = append(out, line{Node: r.Node, NodeGroup: r.Group, Disruption: r.For, Phase: r.Phase,
			PhaseSince: r.PhaseSince.UTC().Format(time.RFC3339), Started: r.Started.UTC().Format(time.RFC3339),
			Reason: "scale-down: " + r.Why})
	}
	var heals map[string]*plan
	if h.st != nil {
		heals = h.st.Heals
	}
	for _, r := range heals {
		l := line{Node: r.Node, NodeGroup: r.Group, Disruption: r.For, Phase: r.Phase,
			PhaseSince: r.PhaseSince.UTC().Format(time.RFC3339), Started: r.Started.UTC().Format(time.RFC3339), Reason: r.Reason}
		if len(r.Nodes) > 1 {
			for _, m := range r.Nodes {
				l.Nodes = append(l.Nodes, m.Node)
			}
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	b, err := yaml.Marshal(out)
	if err != nil {
		return nil
	}
	return map[string]string{StatusKey: string(b)}
}

// Validate checks options at start-up.
func (o Options) Validate() error {
	var errs []error
	if o.MaxConcurrent < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-heals must be at least 1, got %d", o.MaxConcurrent))
	}
	if o.Cooldown < 0 {
		errs = append(errs, fmt.Errorf("--node-healing-cooldown must not be negative"))
	}
	if o.MaxUnhealthyPercent <= 0 || o.MaxUnhealthyPercent > 100 {
		errs = append(errs, fmt.Errorf("--node-healing-max-unhealthy-percent must be in (0, 100], got %v", o.MaxUnhealthyPercent))
	}
	if o.SettleTime < 0 {
		errs = append(errs, fmt.Errorf("--disruption-settle-time must not be negative"))
	}
	seen := map[string]bool{}
	for _, p := range o.Policies {
		k := string(p.Type) + "=" + string(p.Status)
		if seen[k] {
			errs = append(errs, fmt.Errorf("--node-healing-policy: %s given twice", k))
		}
		seen[k] = true
	}
	return errors.Join(errs...)
}

// PolicyStrings renders policies for logs.
func PolicyStrings(ps []Policy) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

// Replacing names the nodes of the plans in flight that ask for new
// capacity (their pods fit only once it has come).
func (h *Engine) Replacing() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	if h.st == nil {
		return out
	}
	for _, r := range h.st.Heals {
		if len(r.Replacements) == 0 {
			continue
		}
		for _, m := range r.Nodes {
			out[m.Node] = true
		}
	}
	return out
}

// InFlight names the nodes of the plans in flight and of scale-down's
// removals, with the reason each goes for (as last written or read; empty
// before the first loop). A source
// that runs elsewhere in the loop leaves them out of its own simulation, and
// goes on offering those of its reason while it holds (see Offer).
func (h *Engine) InFlight() map[string]Reason {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Reason{}
	h.rmu.Lock()
	for _, r := range h.removalsLocked() {
		out[r.Node] = r.For
	}
	h.rmu.Unlock()
	if h.st == nil {
		return out
	}
	for _, r := range h.st.Heals {
		for _, m := range r.Nodes {
			out[m.Node] = r.For
		}
	}
	return out
}
