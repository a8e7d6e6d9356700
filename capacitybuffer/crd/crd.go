package crd

import (
	"bytes"
	"context"
	_ "embed" // the CRD manifest
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"k8s.io/autoscaler/cluster-autoscaler/customresources"
)

// Name is the name of the CapacityBuffer CRD.
const Name = "capacitybuffers.autoscaling.x-k8s.io"

//go:embed autoscaling.x-k8s.io_capacitybuffers.yaml
var manifest []byte

// Manifest returns a copy of the CRD's YAML.
func Manifest() []byte { return bytes.Clone(manifest) }

// CRD returns the CRD decoded from the manifest.
func CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := customresources.Decode(manifest)
	if err != nil {
		return nil, fmt.Errorf("decoding the embedded %s manifest: %w", Name, err)
	}
	return crd, nil
}

// Install creates the CRD, or updates it to the embedded manifest, and waits
// until it is served; see customresources.Install.
func Install(ctx context.Context, cfg *rest.Config) error {
	return customresources.Install(ctx, cfg, manifest)
}
