package builder

// Stack holds what a build must undo when it ends, undone in reverse order
// as defers would be: each step that starts something (informers, event
// broadcasting, removals in flight) pushes its undoing right after it.
type Stack struct{ undo []func() }

// Defer pushes f, to run at Unwind after everything pushed later.
func (s *Stack) Defer(f func()) { s.undo = append(s.undo, f) }

// Unwind runs what was pushed, last first, and empties the stack.
func (s *Stack) Unwind() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}
