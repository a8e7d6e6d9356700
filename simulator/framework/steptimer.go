package framework

import "time"

// SnapshotStep names a snapshot operation that runs many times in a loop.
type SnapshotStep int

// The timed snapshot steps.
const (
	StepFork SnapshotStep = iota
	StepCommit
	StepRevert
)

// StepObserver receives how long each timed step took; it is called from
// the goroutine running the step.
type StepObserver func(step SnapshotStep, d time.Duration)

// SetStepObserver makes the snapshot time its Fork, Commit and Revert and
// report them to o while it holds DRA objects (a DRASource is set): they
// then carry the ResourceClaims and ResourceSlices, the work upstream times
// as its DRA snapshot's steps. It survives Reset; nil stops the timing.
func (s *Snapshot) SetStepObserver(o StepObserver) { s.observer = o }

// timeStep starts timing step and returns the function that ends it; both
// do nothing when no observer wants it.
func (s *Snapshot) timeStep(step SnapshotStep) func() {
	if s.observer == nil || s.dra.source == nil {
		return func() {}
	}
	o, start := s.observer, time.Now()
	return func() { o(step, time.Since(start)) }
}
