package capacityquota

import (
	"bytes"
	"context"
	_ "embed" // the CRD manifest

	"k8s.io/client-go/rest"

	"k8s.io/autoscaler/cluster-autoscaler/customresources"
)

//go:embed autoscaling.x-k8s.io_capacityquotas.yaml
var manifest []byte

// Manifest returns a copy of the CRD's YAML (the chart ships the same file).
func Manifest() []byte { return bytes.Clone(manifest) }

// InstallCRD creates or updates the CRD and waits until it is served.
func InstallCRD(ctx context.Context, cfg *rest.Config) error {
	return customresources.Install(ctx, cfg, manifest)
}
