package clusterapi

// maxOwnScales is how many of its own replica writes the provider keeps per
// group: enough for the removals of a few overlapping loops.
const maxOwnScales = 16

// ownScale is one replicas write of the autoscaler: from the replicas it
// found to those it wrote.
type ownScale struct{ from, to int }

// scaleKey names the group's scalable object among the provider's own
// writes.
func (g *NodeGroup) scaleKey() string {
	return g.kind + "/" + g.obj.GetNamespace() + "/" + g.obj.GetName()
}

// recordOwnScale remembers a replicas write of the autoscaler to key.
func (p *Provider) recordOwnScale(key string, from, to int) {
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	if p.ownScales == nil {
		p.ownScales = map[string][]ownScale{}
	}
	w := append(p.ownScales[key], ownScale{from: from, to: to})
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
