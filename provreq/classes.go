package provreq

// Provisioning class names. The autoscaler handles the two canonical classes;
// the older kubernetes.io names are accepted as aliases of them. Requests of
// any other class belong to someone else and are left untouched.
const (
	// ClassCheckCapacity only checks that the pods fit the existing
	// nodes, and books that room; it never adds nodes.
	ClassCheckCapacity = "check-capacity.autoscaling.x-k8s.io"
	// ClassBestEffortAtomicScaleUp adds the nodes all pods of the request
	// need at once, or none.
	ClassBestEffortAtomicScaleUp = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

	// LegacyClassCheckCapacity is an older name of ClassCheckCapacity.
	LegacyClassCheckCapacity = "check-capacity.kubernetes.io"
	// LegacyClassAtomicScaleUp is an older name of
	// ClassBestEffortAtomicScaleUp.
	LegacyClassAtomicScaleUp = "atomic-scale-up.kubernetes.io"
)

// NormalizeClass returns the canonical name of a provisioning class and
// whether the autoscaler handles it. An alias maps to its canonical class;
// an unknown class comes back unchanged with false.
func NormalizeClass(class string) (canonical string, handled bool) {
	switch class {
	case ClassCheckCapacity, LegacyClassCheckCapacity:
		return ClassCheckCapacity, true
	case ClassBestEffortAtomicScaleUp, LegacyClassAtomicScaleUp:
		return ClassBestEffortAtomicScaleUp, true
	default:
		return class, false
	}
}
