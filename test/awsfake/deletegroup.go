package awsfake

// DeleteGroup deletes an Auto Scaling group as a forced DeleteAutoScalingGroup
// does: its instances are terminated at once, and the group is no longer
// described. A group it does not know is ignored.
func (s *Server) DeleteGroup(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return
	}
	for _, in := range g.members {
		in.Lifecycle = LifecycleTerminated
		delete(s.inFlight, in.ID)
	}
	g.members = nil
	delete(s.groups, name)
}
