package processor

// share is one node group's part of an atomic attempt, or of a rollback
// still to finish. Instances are attributed to it by name as the provider
// lists them, by the leader that made the increase: any instance of the
// group that was not listed before the increase (before) and that no other
// share holds, up to asked. Those claimed instances are the only ones a
// rollback of the share may delete.
//
// A share read back from a record (restored) was made by another leader:
// what happened in the group since that leader last wrote the record is
// not known (another scale-up, an operator, the cloud replacing an
// instance), so its instances are no longer claimed that way. Instances
// listed since count toward the attempt's progress (adopted) and are never
// deleted by its rollback.
type share struct {
	asked   int
	before  map[string]bool
	claimed []string
	adopted []string
	// restored: read from a record; nothing more is claimed.
	restored bool
	// kept are claimed instances a rollback did not delete because their
	// nodes run pods other than the request's, with why.
	kept map[string]string
	// deleting: a rollback was already asked to delete the claimed
	// instances (its answer may have been lost while the deletion took
	// effect): one no longer listed is gone, and no other instance takes
	// its place (it could be another request's).
	deleting bool
}

func newShare(asked int, before, listed []string) *share {
	sh := &share{asked: asked, before: make(map[string]bool, len(before))}
	for _, id := range before {
		sh.before[id] = true
	}
	sh.claimed = append(sh.claimed, listed[:min(len(listed), asked)]...)
	return sh
}

func (sh *share) unlisted() int { return max(0, sh.asked-len(sh.claimed)-len(sh.adopted)) }

// listed are the share's instances, claimed and adopted.
func (sh *share) listed() []string {
	return append(append(make([]string, 0, len(sh.claimed)+len(sh.adopted)), sh.claimed...), sh.adopted...)
}

// claim attributes newly listed instances to the share; taken are the
// instances other shares hold, and gains those claimed now.
//
// An instance claimed earlier whose id is no longer listed, while a new
// instance nobody holds is, was renamed by the cloud: some providers list a
// requested instance under a placeholder id until it exists (a Cluster API
// Machine before its provider ID is set, for one), so the new id takes the
// old one's place instead of the attempt seeing an instance vanish.
func (sh *share) claim(view GroupView, taken map[string]bool) {
	if sh.restored {
		sh.adopt(view, taken)
		return
	}
	listed := make(map[string]bool, len(view.Instances))
	for _, in := range view.Instances {
		listed[in.Id] = true
	}
	if sh.deleting {
		kept := sh.claimed[:0]
		for _, id := range sh.claimed {
			if listed[id] {
				kept = append(kept, id)
			} else {
				sh.asked--
			}
		}
		sh.claimed = kept
	}
	for i, id := range sh.claimed {
		if listed[id] {
			continue
		}
		for _, in := range view.Instances {
			if !sh.before[in.Id] && !taken[in.Id] {
				sh.claimed[i] = in.Id
				taken[in.Id] = true
				break
			}
		}
	}
	for _, in := range view.Instances {
		if len(sh.claimed) >= sh.asked {
			return
		}
		if sh.before[in.Id] || taken[in.Id] {
			continue
		}
		sh.claimed = append(sh.claimed, in.Id)
		taken[in.Id] = true
	}
}

// adopt is claim for a restored share: newly listed instances, and those
// that take the place of a vanished one, are adopted, never claimed.
func (sh *share) adopt(view GroupView, taken map[string]bool) {
	listed := make(map[string]bool, len(view.Instances))
	for _, in := range view.Instances {
		listed[in.Id] = true
	}
	next := 0
	free := func() string {
		for ; next < len(view.Instances); next++ {
			if id := view.Instances[next].Id; !sh.before[id] && !taken[id] {
				taken[id] = true
				return id
			}
		}
		return ""
	}
	// replace returns ids without the vanished ones that a new instance
	// takes the place of, and those new instances.
	replace := func(ids []string) (kept, added []string) {
		for _, id := range ids {
			if !listed[id] {
				if n := free(); n != "" {
					added = append(added, n)
					continue
				}
			}
			kept = append(kept, id)
		}
		return kept, added
	}
	claimed, forClaimed := replace(sh.claimed)
	adopted, forAdopted := replace(sh.adopted)
	sh.claimed = claimed
	sh.adopted = append(append(adopted, forAdopted...), forClaimed...)
	for len(sh.claimed)+len(sh.adopted) < sh.asked {
		n := free()
		if n == "" {
			return
		}
		sh.adopted = append(sh.adopted, n)
	}
}
