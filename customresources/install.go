package customresources

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// FieldManager is the server-side apply field manager Install writes with.
const FieldManager = "cluster-autoscaler"

// installTimeout bounds Install's wait for the CRD to be served when ctx has
// no earlier deadline.
const installTimeout = time.Minute

// Decode decodes one CRD manifest, strictly.
func Decode(manifest []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(manifest, crd); err != nil {
		return nil, fmt.Errorf("decoding a CRD manifest: %w", err)
	}
	return crd, nil
}

// Install creates the CRD of manifest, or updates it to the manifest, with
// server-side apply, then waits until the API server has accepted its names,
// established it and lists every served version in discovery. When the CRD
// was already established, a changed schema may take the API server a moment
// more to enforce.
func Install(ctx context.Context, cfg *rest.Config, manifest []byte) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the apiextensions client: %w", err)
	}
	want, err := Decode(manifest)
	if err != nil {
		return err
	}
	body, err := yaml.YAMLToJSON(manifest)
	if err != nil {
		return fmt.Errorf("converting the %s manifest to JSON: %w", want.Name, err)
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)}
	if _, err := crds.Patch(ctx, want.Name, types.ApplyPatchType, body, opts); err != nil {
		return fmt.Errorf("applying CRD %s: %w", want.Name, err)
	}

	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, installTimeout, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if !conditionTrue(got, apiextensionsv1.NamesAccepted) || !conditionTrue(got, apiextensionsv1.Established) {
			return false, nil
		}
		for _, v := range want.Spec.Versions {
			if v.Served && !inDiscovery(client, want.Spec.Group+"/"+v.Name, want.Spec.Names.Plural) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", want.Name, err)
	}
	return nil
}

// inDiscovery reports whether the API server lists the resource under the
// group version; an error counts as not yet.
func inDiscovery(client apiextensionsclient.Interface, groupVersion, resource string) bool {
	list, err := client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
}

func conditionTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
