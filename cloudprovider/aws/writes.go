package aws

import (
	"reflect"
	"slices"
	"sort"
	"time"
)

// This process's own writes are applied to the kept description of the
// group when their effect is fully known, so the next Refresh need not read
// the group again for them:
//
//   - IncreaseSize's SetDesiredCapacity: the desired capacity is the value
//     set (the group is then on its way up, and read as such: cache.go);
//   - a termination with decrement: the instance is Terminating and the
//     desired capacity one lower. A group whose only movement is instances
//     this process terminated is not read more often for them: they are
//     on their way out by its own request, and the group is read at its
//     minute's age like a steady one (or at once when the Nodes hint at a
//     change).
//
// Other writes (cancelling capacity, scale-in protection), a write that
// failed, and a write while a Refresh runs mark the group for the next
// Refresh instead. A read never overwrites a write it may not have seen:
// every write counts up its group's generation before and after the call,
// and a read made while the generation moved is not kept.

// beginWrite and endWrite bracket a write to the group.
func (p *Provider) beginWrite(name string) { p.bumpWrite(name) }
func (p *Provider) endWrite(name string)   { p.bumpWrite(name) }

func (p *Provider) bumpWrite(name string) {
	p.mu.Lock()
	p.writeGen[name]++
	p.written[name] = true
	p.mu.Unlock()
}

// writeGens returns the write generations of the groups, before a read.
func (p *Provider) writeGens(names []string) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(names))
	for _, n := range names {
		out[n] = p.writeGen[n]
	}
	return out
}

// writeQuiet reports whether no write to the group started or ran since
// its generation was gen.
func (p *Provider) writeQuiet(name string, gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.writeGen[name] == gen && gen%2 == 0
}

// applyWrite changes the group's kept description by fn after a write of
// this process succeeded; when it cannot (a Refresh is running, the group
// is not kept, fn declines), the next Refresh reads the group.
func (p *Provider) applyWrite(name string, fn func(d *groupDesc) bool) {
	if p.refreshMu.TryLock() {
		c := p.cache[name]
		ok := c != nil && fn(&c.desc)
		if ok {
			c.changedAt = p.clock.Now()
		}
		p.refreshMu.Unlock()
		if ok {
			return
		}
	}
	p.invalidate(name)
}

// desiredSet is the effect of SetDesiredCapacity to n.
func desiredSet(n int) func(*groupDesc) bool {
	return func(d *groupDesc) bool {
		if n < 0 || n > d.Max {
			return false
		}
		d.Desired = n
		return true
	}
}

// terminatedIn is the effect of terminating instance id with a decrement
// of the desired capacity; it remembers the instance as terminated by this
// process. Called under refreshMu.
func (p *Provider) terminatedIn(id string) func(*groupDesc) bool {
	return func(d *groupDesc) bool {
		i := slices.IndexFunc(d.Instances, func(in instanceDesc) bool { return in.ID == id })
		if i < 0 || d.Instances[i].terminating() || d.Desired < 1 {
			return false
		}
		// A copy: the loop's node groups share the kept slice.
		ins := slices.Clone(d.Instances)
		ins[i].Lifecycle = "Terminating"
		d.Instances, d.Desired = ins, d.Desired-1
		p.ownTerminations[id] = d.Name
		return true
	}
}

// moving reports whether the kept group has capacity on its way in or
// out, other than instances this process terminated. Called under
// refreshMu.
func (p *Provider) moving(c *cachedGroup) bool {
	if c.desc.Desired != c.desc.live() {
		return true
	}
	for _, in := range c.desc.Instances {
		if in.pending() || in.terminating() && p.ownTerminations[in.ID] == "" {
			return true
		}
	}
	return false
}

// forgetTerminations drops the instances this process terminated that
// their group no longer lists. Called under refreshMu.
func (p *Provider) forgetTerminations() {
	for id, name := range p.ownTerminations {
		c := p.cache[name]
		if c == nil {
			delete(p.ownTerminations, id)
			continue
		}
		if _, ok := c.desc.findInstance(id); !ok {
			delete(p.ownTerminations, id)
		}
	}
}

// pad fills the last DescribeAutoScalingGroups call of names up to
// describeBatch names with the kept groups read longest ago (none of skip):
// the call costs the same, and those groups need not be read again for a
// minute. Called under refreshMu.
func (p *Provider) pad(names []string, skip map[string]groupDesc) []string {
	room := (describeBatch - len(names)%describeBatch) % describeBatch
	if len(names) == 0 || room == 0 {
		return names
	}
	in := make(map[string]bool, len(names))
	for _, n := range names {
		in[n] = true
	}
	var more []string
	for n := range p.cache {
		if _, listed := skip[n]; !in[n] && !listed {
			more = append(more, n)
		}
	}
	sort.Slice(more, func(i, j int) bool {
		a, b := p.cache[more[i]].readAt, p.cache[more[j]].readAt
		if !a.Equal(b) {
			return a.Before(b)
		}
		return more[i] < more[j]
	})
	return append(names, more[:min(room, len(more))]...)
}

// keepFresh puts the descriptions of a read made outside Refresh (started
// at start, numbered seq, with the write generations gens) into the kept
// groups it covers, unless a later read is kept already or a write to the
// group moved meanwhile; it returns the groups kept. Groups the read did
// not find are read at the next Refresh. A running Refresh wins: nothing is
// kept then.
func (p *Provider) keepFresh(start time.Time, seq uint64, names []string, descs map[string]groupDesc, gens map[string]int) map[string]bool {
	kept := map[string]bool{}
	if !p.refreshMu.TryLock() {
		return kept
	}
	defer p.refreshMu.Unlock()
	for _, n := range names {
		c := p.cache[n]
		d, found := descs[n]
		switch {
		case c == nil, c.seq > seq, !p.writeQuiet(n, gens[n]):
			continue
		case !found:
			p.invalidate(n)
			continue
		}
		if !reflect.DeepEqual(c.desc, d) {
			c.changedAt = start
		}
		c.desc, c.readAt, c.seq = d, start, seq
		kept[n] = true
	}
	return kept
}
