package framework

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestStepObserverTimesForkCommitRevertWithDRA: with DRA objects in the
// snapshot every Fork, Commit and Revert is reported, also after Reset;
// without a DRASource nothing is.
func TestStepObserverTimesForkCommitRevertWithDRA(t *testing.T) {
	node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, tc := range []struct {
		name string
		dra  bool
		want []SnapshotStep
	}{
		{name: "with DRA", dra: true, want: []SnapshotStep{StepFork, StepFork, StepCommit, StepRevert,
			StepFork, StepRevert}},
		{name: "without DRA", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot([]*apiv1.Node{node}, nil)
			if tc.dra {
				s.SetDRASource(newDRAFixture())
				s.Reset([]*apiv1.Node{node}, nil)
			}
			var got []SnapshotStep
			s.SetStepObserver(func(step SnapshotStep, d time.Duration) {
				if d < 0 {
					t.Errorf("negative duration %v", d)
				}
				got = append(got, step)
			})
			s.Fork()
			s.Fork()
			s.Commit()
			s.Revert()
			s.Reset([]*apiv1.Node{node}, nil) // the observer stays
			s.Fork()
			s.Revert()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
}
