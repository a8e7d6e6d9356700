package drain

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

func TestReplicatedRule(t *testing.T) {
	l := makeListers(t, replicaSet("default", "web", 2), job("default", "batch"))
	custom := makePod("p").Owner("example.com/v1", "Widget", "w").Obj()
	tests := []struct {
		name       string
		pod        *apiv1.Pod
		skipCustom bool // --skip-nodes-with-custom-controller-pods
		nilListers bool
		want       verdict
		wantReason BlockingReason
	}{
		{name: "no controller", pod: makePod("p").Obj(), skipCustom: true, want: block, wantReason: NotReplicated},
		{name: "no controller, flag off", pod: makePod("p").Obj(), want: block, wantReason: NotReplicated},
		{name: "non-controller owner only", pod: func() *apiv1.Pod {
			p := makePod("p").ReplicaSet("web").Obj()
			p.OwnerReferences[0].Controller = nil
			return p
		}(), want: block, wantReason: NotReplicated},
		{name: "custom controller, flag on", pod: custom, skipCustom: true, want: block, wantReason: NotReplicated},
		{name: "custom controller, flag off: trusted", pod: custom, want: undecided},
		{name: "ReplicaSet, flag on: looked up earlier, not here", pod: makePod("p").ReplicaSet("gone").Obj(), skipCustom: true, want: undecided},
		{name: "ReplicaSet found, flag off", pod: makePod("p").ReplicaSet("web").Obj(), want: undecided},
		{name: "ReplicaSet missing, flag off", pod: makePod("p").ReplicaSet("gone").Obj(), want: block, wantReason: ControllerNotFound},
		{name: "Job found, flag off", pod: makePod("p").Owner("batch/v1", "Job", "batch").Obj(), want: undecided},
		{name: "ReplicaSet missing, flag off, nil listers", pod: makePod("p").ReplicaSet("gone").Obj(), nilListers: true, want: undecided},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls := l
			if tc.nilListers {
				ls = Listers{}
			}
			r := replicatedRule{listers: ls, lookUp: !tc.skipCustom, customIsNotReplicated: tc.skipCustom}
			checkOutcome(t, r.check(tc.pod, &classifyEnv{now: t0}), tc.want, tc.wantReason)
		})
	}
}
