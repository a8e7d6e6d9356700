package framework

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
)

// DRAGroupVersion is the API the simulation reads DRA objects from.
const DRAGroupVersion = "resource.k8s.io/v1"

// draResources are the resources of DRAGroupVersion the simulation lists.
var draResources = []string{"resourceslices", "resourceclaims", "deviceclasses", "resourceclaimtemplates"}

// DRAResources are the resources of DRAGroupVersion the simulation reads
// (a copy).
func DRAResources() []string { return append([]string(nil), draResources...) }

// DRAServed reports whether the API server serves DRAGroupVersion with every
// resource the simulation reads; an error is a discovery failure other than
// the group version not being served.
func DRAServed(d discovery.DiscoveryInterface) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(DRAGroupVersion)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", DRAGroupVersion, err)
	}
	served := map[string]bool{}
	for _, r := range list.APIResources {
		served[r.Name] = true
	}
	for _, r := range draResources {
		if !served[r] {
			return false, nil
		}
	}
	return true, nil
}

// informerDRA is a DRASource over informer listers.
type informerDRA struct {
	slices    resourcelisters.ResourceSliceLister
	claims    resourcelisters.ResourceClaimLister
	classes   resourcelisters.DeviceClassLister
	templates resourcelisters.ResourceClaimTemplateLister
}

// NewInformerDRASource registers on factory the informers of
// ResourceSlices, ResourceClaims, DeviceClasses and ResourceClaimTemplates
// and reads them; start the factory afterwards. Use it only when DRAServed.
func NewInformerDRASource(factory informers.SharedInformerFactory) DRASource {
	r := factory.Resource().V1()
	return &informerDRA{slices: r.ResourceSlices().Lister(), claims: r.ResourceClaims().Lister(),
		classes: r.DeviceClasses().Lister(), templates: r.ResourceClaimTemplates().Lister()}
}

func (s *informerDRA) ResourceSlices() ([]*resourceapi.ResourceSlice, error) {
	return s.slices.List(labels.Everything())
}

func (s *informerDRA) ResourceClaims() ([]*resourceapi.ResourceClaim, error) {
	return s.claims.List(labels.Everything())
}

func (s *informerDRA) DeviceClasses() ([]*resourceapi.DeviceClass, error) {
	return s.classes.List(labels.Everything())
}

func (s *informerDRA) ResourceClaimTemplate(namespace, name string) (*resourceapi.ResourceClaimTemplate, error) {
	t, err := s.templates.ResourceClaimTemplates(namespace).Get(name)
	if err != nil {
		return nil, fmt.Errorf("ResourceClaimTemplate %s/%s: %w", namespace, name, err)
	}
	return t, nil
}
