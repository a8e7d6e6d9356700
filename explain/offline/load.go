package offline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"

	"k8s.io/autoscaler/cluster-autoscaler/snapshotdump"
)

// ErrIncomplete: the dump lacks what an offline loop needs.
var ErrIncomplete = errors.New("the dump cannot be explained offline")

// Load decodes a /snapshotz dump. A dump without node groups (taken by an
// autoscaler from before they were recorded) is refused with
// ErrIncomplete and what it lacks; notes says what a loadable dump lacks
// that makes the answer less faithful.
func Load(r io.Reader) (snap *snapshotdump.DebuggingSnapshot, notes []string, err error) {
	snap = &snapshotdump.DebuggingSnapshot{}
	dec := json.NewDecoder(r)
	if err := dec.Decode(snap); err != nil {
		return nil, nil, fmt.Errorf("decoding the dump: %w", err)
	}
	var missing []string
	if snap.NodeGroups == nil {
		missing = append(missing, "NodeGroups (the node groups' ids, min, max and target sizes, instances)")
	}
	if snap.NodeGroupOfNode == nil {
		missing = append(missing, "NodeGroupOfNode (which group each node belongs to)")
	}
	if snap.StartTimestamp.IsZero() {
		missing = append(missing, "StartTimestamp")
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("%w: it has no %v; take a new one from /snapshotz of an autoscaler that records them",
			ErrIncomplete, missing)
	}
	for i, sn := range snap.NodeList {
		if sn == nil || sn.Node == nil {
			return nil, nil, fmt.Errorf("%w: NodeList[%d] has no node", ErrIncomplete, i)
		}
	}
	if snap.Objects == nil {
		notes = append(notes, "the dump has no Objects (DaemonSets, controllers, PodDisruptionBudgets): "+
			"scale-down sees no PDB and no pod's controller, templates no DaemonSet")
	}
	if (snap.Objects == nil || !snap.Objects.DRA) && claimsPending(snap) {
		notes = append(notes, "the dump has no DRA objects (taken by an older autoscaler, or of a cluster that does not "+
			"serve resource.k8s.io/v1): pods with resource claims fit no node")
	}
	if snap.Error != "" {
		notes = append(notes, "the dump says: "+snap.Error)
	}
	return snap, notes, nil
}

// claimsPending tells whether a pending pod of the dump has resource claims.
func claimsPending(snap *snapshotdump.DebuggingSnapshot) bool {
	for _, p := range snap.PendingPods {
		if p != nil && len(p.Spec.ResourceClaims) > 0 {
			return true
		}
	}
	return false
}

// Objects are the dump's Kubernetes objects, for an in-memory client:
// nodes, their pods, the pending pods and the dump's other objects.
func Objects(snap *snapshotdump.DebuggingSnapshot) []runtime.Object {
	var out []runtime.Object
	for _, sn := range snap.NodeList {
		out = append(out, sn.Node.DeepCopy())
		for _, p := range sn.Pods {
			if p != nil {
				out = append(out, p.DeepCopy())
			}
		}
	}
	for _, p := range snap.PendingPods {
		if p != nil {
			out = append(out, p.DeepCopy())
		}
	}
	o := snap.Objects
	if o == nil {
		return out
	}
	out = appendCopies(out, o.DaemonSets)
	out = appendCopies(out, o.ReplicaSets)
	out = appendCopies(out, o.StatefulSets)
	out = appendCopies(out, o.Jobs)
	out = appendCopies(out, o.ReplicationControllers)
	out = appendCopies(out, o.PodDisruptionBudgets)
	out = appendCopies(out, o.ConfigMaps)
	out = appendCopies(out, o.ResourceSlices)
	out = appendCopies(out, o.ResourceClaims)
	out = appendCopies(out, o.DeviceClasses)
	return appendCopies(out, o.ResourceClaimTemplates)
}

// appendCopies appends a copy of each non-nil object of objs.
func appendCopies[T interface {
	comparable
	runtime.Object
}](out []runtime.Object, objs []T) []runtime.Object {
	var zero T
	for _, x := range objs {
		if x != zero {
			out = append(out, x.DeepCopyObject())
		}
	}
	return out
}
