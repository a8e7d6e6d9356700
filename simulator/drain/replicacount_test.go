package drain

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

func TestReplicaCountRule(t *testing.T) {
	objs := []runtime.Object{
		replicaSet("default", "rs3", 3), replicaSet("default", "rs1", 1),
		replicationController("default", "rc3", 3), replicationController("default", "rc0", 0),
		statefulSet("default", "ss"), job("default", "job"),
		replicaSet("other", "elsewhere", 3),
	}
	withOtherUID := func(p *apiv1.Pod) *apiv1.Pod { p.OwnerReferences[0].UID = types.UID("recreated"); return p }
	tests := []struct {
		name        string
		pod         *apiv1.Pod
		minReplicas int
		nilListers  bool
		brokenRS    bool
		want        verdict
		wantReason  BlockingReason
	}{
		{name: "no controller defers (replicatedRule judges)", pod: makePod("p").Obj(), want: undecided},
		{name: "ReplicaSet found", pod: makePod("p").ReplicaSet("rs3").Obj(), minReplicas: 2, want: undecided},
		{name: "ReplicaSet with as many replicas as the minimum", pod: makePod("p").ReplicaSet("rs3").Obj(), minReplicas: 3, want: undecided},
		{name: "ReplicaSet below the minimum", pod: makePod("p").ReplicaSet("rs1").Obj(), minReplicas: 2,
			want: block, wantReason: MinReplicasReached},
		{name: "ReplicaSet missing", pod: makePod("p").ReplicaSet("gone").Obj(), want: block, wantReason: ControllerNotFound},
		{name: "ReplicaSet of the same name in another namespace", pod: makePod("p").ReplicaSet("elsewhere").Obj(),
			want: block, wantReason: ControllerNotFound},
		{name: "ReplicaSet recreated under the same name", pod: withOtherUID(makePod("p").ReplicaSet("rs3").Obj()),
			want: block, wantReason: ControllerNotFound},
		{name: "ReplicationController found", pod: makePod("p").Owner("v1", "ReplicationController", "rc3").Obj(),
			minReplicas: 1, want: undecided},
		{name: "ReplicationController below the minimum", pod: makePod("p").Owner("v1", "ReplicationController", "rc0").Obj(),
			minReplicas: 1, want: block, wantReason: MinReplicasReached},
		{name: "ReplicationController missing", pod: makePod("p").Owner("v1", "ReplicationController", "gone").Obj(),
			want: block, wantReason: ControllerNotFound},
		{name: "StatefulSet found (no replica minimum)", pod: makePod("p").Owner("apps/v1", "StatefulSet", "ss").Obj(),
			minReplicas: 5, want: undecided},
		{name: "StatefulSet missing", pod: makePod("p").Owner("apps/v1", "StatefulSet", "gone").Obj(),
			want: block, wantReason: ControllerNotFound},
		{name: "Job found", pod: makePod("p").Owner("batch/v1", "Job", "job").Obj(), minReplicas: 5, want: undecided},
		{name: "Job missing", pod: makePod("p").Owner("batch/v1", "Job", "gone").Obj(), want: block, wantReason: ControllerNotFound},
		{name: "third-party StatefulSet: no lister, assumed present",
			pod: makePod("p").Owner("apps.kruise.io/v1beta1", "StatefulSet", "gone").Obj(), want: undecided},
		{name: "custom controller is not looked up", pod: makePod("p").Owner("example.com/v1", "Widget", "w").Obj(), want: undecided},
		{name: "DaemonSet is not looked up", pod: makePod("p").DaemonSet("gone").Obj(), want: undecided},
		{name: "nil listers: assumed present", pod: makePod("p").ReplicaSet("gone").Obj(), minReplicas: 2, nilListers: true, want: undecided},
		{name: "lister error", pod: makePod("p").ReplicaSet("rs3").Obj(), brokenRS: true, want: block, wantReason: UnexpectedError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := makeListers(t, objs...)
			if tc.nilListers {
				l = Listers{}
			}
			if tc.brokenRS {
				l.ReplicaSets = brokenRSLister{}
			}
			r := replicaCountRule{listers: l, minReplicas: tc.minReplicas}
			checkOutcome(t, r.check(tc.pod, &classifyEnv{now: t0}), tc.want, tc.wantReason)
		})
	}
}
