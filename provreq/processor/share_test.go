package processor

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestShareClaimAfterRollback: a share's claimed instance that is no longer
// listed is replaced by a new instance of the group while the attempt runs
// (the cloud replaced it), but not once a rollback was asked to delete it:
// its deletion may have taken effect with its answer lost, and the new
// instance may be another request's.
func TestShareClaimAfterRollback(t *testing.T) {
	view := GroupView{Instances: []InstanceState{{Id: "old"}, {Id: "other"}}}
	for _, tc := range []struct {
		name        string
		deleting    bool
		wantClaimed []string
		wantAsked   int
	}{
		{"attempt running: a vanished instance's place is taken", false, []string{"other"}, 1},
		{"rollback asked: a vanished instance is gone, nothing takes its place", true, []string{}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh := &share{asked: 1, before: map[string]bool{"old": true}, claimed: []string{"mine"}, deleting: tc.deleting}
			sh.claim(view, map[string]bool{})
			if diff := cmp.Diff(tc.wantClaimed, sh.claimed); diff != "" {
				t.Errorf("claimed (-want +got):\n%s", diff)
			}
			if sh.asked != tc.wantAsked {
				t.Errorf("asked %d, want %d", sh.asked, tc.wantAsked)
			}
		})
	}
}
