package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of CapacityBuffers.
	GroupName = "autoscaling.x-k8s.io"
	// Version is this package's API version.
	Version = "v1beta1"
	// Kind is the kind of a CapacityBuffer.
	Kind = "CapacityBuffer"
	// ResourcePlural is the resource name of CapacityBuffers in URLs.
	ResourcePlural = "capacitybuffers"
)

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource returns the group-qualified resource of the given name, for
// error messages and listers.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// AddToScheme registers this version's types, and the meta types every
// group version needs, in the scheme.
func AddToScheme(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
