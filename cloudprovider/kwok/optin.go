package kwok

import (
	"context"
	"errors"
	"fmt"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// EnabledFlag is the flag that opts the provider into the cluster it runs
// against when that cluster has no ConfigMap kwok-provider-config.
const EnabledFlag = "--kwok-provider-enabled"

// ErrNotOptedIn says the provider was started against a cluster that was
// not pointed at it: it would create simulated Node objects there.
var ErrNotOptedIn = errors.New("the kwok provider was not enabled for this cluster")

// configMap returns the config ConfigMap, nil when there is none.
func configMap(ctx context.Context, client kubernetes.Interface, namespace, name string) (*apiv1.ConfigMap, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return cm, err
}

// checkOptIn returns the config ConfigMap (nil when there is none or it was
// not read) once the provider may run against this cluster: the cluster
// holds the ConfigMap, or the command line says --kwok-provider-enabled. A
// --cloud-config file or --nodes alone are not an opt-in: they say what to
// simulate, not where, and a command line written for another cloud
// (--nodes=1:10:my-asg, a cloud config path) must not end in fake Nodes.
func checkOptIn(ctx context.Context, client kubernetes.Interface, namespace, name string, enabled, fromFile bool) (*apiv1.ConfigMap, error) {
	if enabled && fromFile {
		return nil, nil // the ConfigMap is neither needed nor read
	}
	cm, err := configMap(ctx, client, namespace, name)
	switch {
	case err != nil && enabled:
		return nil, fmt.Errorf("reading ConfigMap %s/%s (or pass --cloud-config or --nodes): %w", namespace, name, err)
	case err != nil:
		return nil, fmt.Errorf("%w: reading ConfigMap %s/%s, whose presence enables it: %w", ErrNotOptedIn, namespace, name, err)
	case cm == nil && !enabled:
		return nil, fmt.Errorf("%w: it creates simulated Node objects in the cluster it runs against, and this cluster "+
			"has no ConfigMap %s/%s and the command line no %s. If this cluster's nodes are meant to be kwok's, create "+
			"that ConfigMap (the Helm chart renders it from kwokProviderConfig) or pass %s; otherwise set "+
			"--cloud-provider to the cluster's cloud (the Helm chart's cloudProvider, whose default is aws)",
			ErrNotOptedIn, namespace, name, EnabledFlag, EnabledFlag)
	}
	return cm, nil
}
