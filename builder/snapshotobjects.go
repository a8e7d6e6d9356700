package builder

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
)

// SnapshotObjects lists, from the informer caches, the objects a
// /snapshotz dump carries besides nodes and pods; nsFactory is the
// autoscaler namespace's (the priority expander's ConfigMap); dra, when
// the cluster serves resource.k8s.io/v1 (the DRA informers are then on f).
// The listers are made now, so that their informers start with the
// factories.
func SnapshotObjects(f, nsFactory informers.SharedInformerFactory, namespace string, dra bool) func() (*core.SnapshotObjects, error) {
	ds, rs, ss := f.Apps().V1().DaemonSets().Lister(), f.Apps().V1().ReplicaSets().Lister(), f.Apps().V1().StatefulSets().Lister()
	jobs, rcs := f.Batch().V1().Jobs().Lister(), f.Core().V1().ReplicationControllers().Lister()
	pdbs := f.Policy().V1().PodDisruptionBudgets().Lister()
	var configMaps corelisters.ConfigMapNamespaceLister
	if nsFactory != nil {
		configMaps = nsFactory.Core().V1().ConfigMaps().Lister().ConfigMaps(namespace)
	}
	listDRA := draObjects(f, dra)
	return func() (*core.SnapshotObjects, error) {
		var o core.SnapshotObjects
		var errs [7]error
		errs[6] = listDRA(&o)
		o.DaemonSets, errs[0] = ds.List(labels.Everything())
		o.ReplicaSets, errs[1] = rs.List(labels.Everything())
		o.StatefulSets, errs[2] = ss.List(labels.Everything())
		o.Jobs, errs[3] = jobs.List(labels.Everything())
		o.ReplicationControllers, errs[4] = rcs.List(labels.Everything())
		o.PodDisruptionBudgets, errs[5] = pdbs.List(labels.Everything())
		if configMaps != nil {
			if cm, err := configMaps.Get(expander.PriorityConfigMapName); err == nil {
				o.ConfigMaps = append(o.ConfigMaps, cm)
			}
		}
		for _, err := range errs {
			if err != nil {
				return &o, fmt.Errorf("listing from the informer caches: %w", err)
			}
		}
		return &o, nil
	}
}

// draObjects returns what lists the DRA objects into a snapshot's objects
// (nothing when the cluster does not serve them).
func draObjects(f informers.SharedInformerFactory, served bool) func(*core.SnapshotObjects) error {
	if !served {
		return func(*core.SnapshotObjects) error { return nil }
	}
	r := f.Resource().V1()
	slices, claims, classes, templates := r.ResourceSlices().Lister(), r.ResourceClaims().Lister(),
		r.DeviceClasses().Lister(), r.ResourceClaimTemplates().Lister()
	return func(o *core.SnapshotObjects) error {
		o.DRA = true
		var errs [4]error
		o.ResourceSlices, errs[0] = slices.List(labels.Everything())
		o.ResourceClaims, errs[1] = claims.List(labels.Everything())
		o.DeviceClasses, errs[2] = classes.List(labels.Everything())
		o.ResourceClaimTemplates, errs[3] = templates.List(labels.Everything())
		return errors.Join(errs[:]...)
	}
}
