package clusterapi

import "time"

// ownLagWindow is how long a replicas write of the autoscaler may be
// missing from the informers' cache before the cache is believed again
// (the cache is normally milliseconds behind; a loop may start sooner).
const ownLagWindow = 30 * time.Second

// maxOwnScales is how many of its own replica writes the provider keeps per
// group: enough for the removals of a few overlapping loops.
const maxOwnScales = 16

// ownScale is one replicas write of the autoscaler: from the replicas it
// found to those it wrote, the resourceVersion the write gave the object,
// when, and whether the informers' cache has shown it (or a later write).
type ownScale struct {
	from, to int
	rv       string
	at       time.Time
	seen     bool
}

// scaleKey names the group's scalable object among the provider's own
// writes.
func (g *NodeGroup) scaleKey() string {
	return g.kind + "/" + g.obj.GetNamespace() + "/" + g.obj.GetName()
}

// recordOwnScale remembers a replicas write of the autoscaler to key.
func (p *Provider) recordOwnScale(key string, from, to int, rv string) {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	if p.ownScales == nil {
		p.ownScales = map[string][]ownScale{}
	}
	w := append(p.ownScales[key], ownScale{from: from, to: to, rv: rv, at: p.clock.Now()})
	if len(w) > maxOwnScales {
		w = w[len(w)-maxOwnScales:]
	}
	p.ownScales[key] = w
}

// ownScalesLead reports whether the autoscaler's own writes to key, in
// order, lead from the replicas old (a snapshot read before them) to cur:
// the difference is then the autoscaler's own (another loop's removal or
// increase finished after this loop's snapshot was read), not anyone
// else's.
func (p *Provider) ownScalesLead(key string, old, cur int) bool {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	at, moved := old, false
	for _, w := range p.ownScales[key] {
		if w.from == at {
			at, moved = w.to, true
		}
	}
	return moved && at == cur
}

// ownReplicasAhead returns the replicas the autoscaler's own writes to key
// lead to from the cached object's replicas and resourceVersion, when the
// informers' cache has not shown them yet: a loop that starts right after
// an increase would otherwise see the old target, no node coming, and ask
// again. A write counts as shown once the cache has its resourceVersion, or
// the result of the last write; only writes not shown and younger than
// ownLagWindow are followed, in order, from the cached replicas.
func (p *Provider) ownReplicasAhead(key string, cached int, rv string) (int, bool) {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	w := p.ownScales[key]
	if len(w) == 0 {
		return cached, false
	}
	for i := range w {
		if w[i].rv != "" && w[i].rv == rv {
			for j := 0; j <= i; j++ {
				w[j].seen = true
			}
		}
	}
	if w[len(w)-1].to == cached {
		for j := range w {
			w[j].seen = true
		}
	}
	now := p.clock.Now()
	at, moved := cached, false
	for _, x := range w {
		if !x.seen && now.Sub(x.at) < ownLagWindow && x.from == at {
			at, moved = x.to, true
		}
	}
	return at, moved
}
