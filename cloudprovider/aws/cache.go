package aws

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// Auto Scaling's describe calls share one rate limit with every other tool
// of the account, so a group's description is kept between loops and read
// again only when something may have changed it:
//
//   - its age reaches the list interval (a minute): a group is never kept
//     longer. Every read fills its last call up to 100 names with the kept
//     groups read longest ago (pad), so the reads a change needs (below)
//     spare the minute's reads of as many groups; the group list (the
//     auto-discovery calls, whose answers are the descriptions of the groups
//     they find, and the --nodes groups not kept) is read once a minute;
//   - this process changed it in a way it cannot reckon (capacity
//     cancelled, scale-in protection, a failed write): the next Refresh reads
//     it. The writes whose effect is known are applied to the kept
//     description instead (writes.go);
//   - it is on its way somewhere (placeholders, Pending instances, or
//     Terminating ones this process did not terminate) and changed in the
//     last transitionWindow: read each loop, or, when the provider sees the
//     Nodes, every transitionalEvery and at once when a Node hints at it
//     (below);
//   - a Node hints at it: a Node appeared whose instance no group lists
//     (the groups with capacity on its way are read), or the Node of an
//     instance a group lists as running is gone (that group is read).
//
// Every change of a group still reads the group afresh first where the
// change depends on what the group has (deletions, cancellations), so a
// description kept for a minute never decides which instance goes; such a
// read is kept too (for the groups it covers that no write moved meanwhile).

// transitionWindow is how long after its last change a group with capacity
// on its way is read more often than once per list interval: a group that
// never settles (a warm pool, Standby instances, launches failing for
// good) costs no more than a steady one after it.
const transitionWindow = 5 * time.Minute

// transitionalEvery is how often a group with capacity on its way is read
// when the provider sees the Nodes (their arrival triggers a read sooner).
const transitionalEvery = 30 * time.Second

// activityEvery is how often the scaling activities of a group short of
// its desired capacity are read (sooner after this process raised it).
const activityEvery = 30 * time.Second

// raisedWindow and raisedEvery: for raisedWindow after this process raised
// a group's desired capacity, while AWS has not launched all of it, the
// group and its latest scaling activity are read every raisedEvery (each
// Refresh at most that often), so that a failed launch (no Spot capacity,
// say) backs the group off in seconds rather than at the next transitional
// read. Once the instances are launched (pending counts) it stops.
const (
	raisedWindow = 2 * time.Minute
	raisedEvery  = time.Second
)

// raisedShort reports whether this process raised the group's desired
// capacity within raisedWindow of now and AWS has not launched all of it.
func (p *Provider) raisedShort(c *cachedGroup, now time.Time) bool {
	if c.desc.Desired <= c.desc.live() {
		return false
	}
	p.mu.Lock()
	at := p.increased[c.desc.Name]
	p.mu.Unlock()
	return !at.IsZero() && now.Sub(at) < raisedWindow
}

// NodeLister lists the cluster's Nodes (an informer's lister).
type NodeLister interface {
	List(selector labels.Selector) ([]*apiv1.Node, error)
}

// WithNodeLister lets the provider compare the groups' instances with the
// cluster's Nodes, to read a group again when they disagree.
func WithNodeLister(l NodeLister) Option { return func(p *Provider) { p.nodes = l } }

// cachedGroup is a group's description with when it was read.
type cachedGroup struct {
	desc      groupDesc
	readAt    time.Time
	changedAt time.Time // when a read last found it different, or this process changed it
	// activity is the group's latest scaling activity, as last read
	// (activityAt; zero when never).
	activity   *latestActivity
	activityAt time.Time
	// seq numbers the read desc comes from: a read started earlier never
	// replaces it.
	seq uint64
}

// transitional reports whether the group has capacity on its way in or out.
func (c *cachedGroup) transitional() bool {
	if c.desc.Desired != c.desc.live() {
		return true
	}
	for _, in := range c.desc.Instances {
		if in.pending() || in.terminating() {
			return true
		}
	}
	return false
}

// invalidate makes the next Refresh read the group: this process changed
// it, or found it changed.
func (p *Provider) invalidate(name string) {
	p.mu.Lock()
	p.dirty[name] = true
	p.mu.Unlock()
}

// takeDirty returns and clears the groups to read because of changes.
func (p *Provider) takeDirty() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.dirty
	p.dirty = map[string]bool{}
	return d
}

// restoreDirty puts back the marks of a Refresh that failed.
func (p *Provider) restoreDirty(d map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := range d {
		p.dirty[n] = true
	}
}

// toRead picks the groups of names to read at now, but those the list
// read described already (listed): not kept, read a list interval ago,
// changed by this process or hinted at by the Nodes (dirty), or on their
// way somewhere. Called under refreshMu.
func (p *Provider) toRead(now time.Time, names []string, dirty map[string]bool, listed map[string]groupDesc) []string {
	var out []string
	for _, n := range names {
		if _, ok := listed[n]; ok {
			continue
		}
		c := p.cache[n]
		switch {
		case c == nil, dirty[n], now.Sub(c.readAt) >= p.listEvery:
		case p.raisedShort(c, now) && now.Sub(c.readAt) >= raisedEvery:
			// Capacity this process asked for lately and AWS has not
			// launched: a failed launch brings no Node to hint at it.
		case p.moving(c) && now.Sub(c.changedAt) < transitionWindow:
			if p.nodes != nil && now.Sub(c.readAt) < transitionalEvery {
				continue
			}
		default:
			continue
		}
		out = append(out, n)
	}
	return out
}

// nodeHints compares the Nodes with the groups' instances as last read and
// returns the groups to read again: those listing a running instance whose
// Node is gone since the last Refresh, and, when a Node appeared whose
// instance no group lists, those with capacity on its way. It remembers
// the Nodes' instances for the next Refresh.
func (p *Provider) nodeHints(ctx context.Context) map[string]bool {
	if p.nodes == nil {
		return nil
	}
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing Nodes to compare with the Auto Scaling groups; groups are read by age only")
		return nil
	}
	now := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		if id, ok := instanceIDOf(n); ok {
			now[id] = true
		}
	}
	prev := p.nodeIDs
	p.nodeIDs = now
	if prev == nil {
		return nil
	}
	out := map[string]bool{}
	byInstance := p.current().byInstance
	unknown := false
	for id := range now {
		if !prev[id] && byInstance[id] == nil && strings.HasPrefix(id, "i-") {
			unknown = true
			break
		}
	}
	for name, c := range p.cache {
		if unknown && c.transitional() {
			out[name] = true
			continue
		}
		for _, in := range c.desc.Instances {
			if !in.terminating() && prev[in.ID] && !now[in.ID] {
				out[name] = true
				break
			}
		}
	}
	if len(out) > 0 {
		klog.FromContext(ctx).V(4).Info("Nodes disagree with the Auto Scaling groups as last read; reading them again", "groups", len(out))
	}
	return out
}

// mergeReads updates the cache with the groups read at now by read seq:
// wanted are the names read by name, descs what AWS described (with the
// list read's groups). A wanted group AWS did not describe is gone and
// leaves the cache; after a list read (listed), so does every group neither
// listed nor named by --nodes.
func (p *Provider) mergeReads(now time.Time, seq uint64, wanted []string, descs map[string]groupDesc, listed bool, dirty map[string]bool) {
	if listed {
		explicit := map[string]bool{}
		for _, e := range p.explicit {
			explicit[e.Name] = true
		}
		for n := range p.cache {
			if _, ok := descs[n]; !ok && !explicit[n] {
				delete(p.cache, n)
			}
		}
	}
	for _, n := range wanted {
		if _, ok := descs[n]; !ok {
			delete(p.cache, n)
		}
	}
	for n, d := range descs {
		c := p.cache[n]
		if c == nil {
			p.cache[n] = &cachedGroup{desc: d, readAt: now, changedAt: now, seq: seq}
			continue
		}
		if dirty[n] || !reflect.DeepEqual(c.desc, d) {
			c.changedAt = now
		}
		c.desc, c.readAt, c.seq = d, now, seq
	}
	p.forgetTerminations()
}

// cachedNames returns the names of the cached groups, sorted.
func (p *Provider) cachedNames() []string {
	out := make([]string, 0, len(p.cache))
	for n := range p.cache {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
