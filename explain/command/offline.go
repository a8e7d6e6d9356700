package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/explain/offline"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
	simframework "k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

// offlineSource reads the /snapshotz dump at path: the loop runs on an
// in-memory client holding the dump's objects (every write refused) and a
// provider made of the dump's node groups, at the dump's time. What needs
// the API server beyond the dump is off: ProvisioningRequests, capacity
// quotas. Notes on what the dump lacks go to errOut.
func offlineSource(opts config.Options, path string, errOut io.Writer) (explainSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return explainSource{}, fmt.Errorf("--snapshot: %w", err)
	}
	defer func() { _ = f.Close() }()
	snap, notes, err := offline.Load(f)
	if err != nil {
		return explainSource{}, fmt.Errorf("--snapshot %s: %w", path, err)
	}
	for _, n := range notes {
		_, _ = fmt.Fprintf(errOut, "explain --snapshot: note: %s\n", n)
	}
	if opts.EnableProvisioningRequests || opts.CapacityQuotasEnabled {
		_, _ = fmt.Fprintln(errOut, "explain --snapshot: note: ProvisioningRequests and CapacityQuotas are not in the dump; "+
			"they are left out of the simulated loop")
	}
	opts.EnableProvisioningRequests = false
	opts.CapacityQuotasEnabled = false
	if snap.CloudProvider == "" {
		snap.CloudProvider = "snapshot"
	}
	opts.CloudProvider = snap.CloudProvider
	provider := offline.NewProvider(snap)
	providers := cloudprovider.NewRegistry()
	providers.Register(snap.CloudProvider, func(context.Context, cloudprovider.BuildOptions) (cloudprovider.CloudProvider, error) {
		return provider, nil
	})
	client := fake.NewClientset()
	for _, o := range offline.Objects(snap) {
		if err := client.Tracker().Add(o); err != nil {
			return explainSource{}, fmt.Errorf("--snapshot %s: %w", path, describeAddError(o, err))
		}
	}
	if snap.Objects != nil && snap.Objects.DRA {
		serveDRA(client)
	}
	client.PrependReactor("*", "*", refuseWrites)
	return explainSource{opts: opts, client: client, providers: providers, now: snap.StartTimestamp}, nil
}

// serveDRA makes the in-memory client's discovery serve resource.k8s.io/v1,
// as the cluster of a dump with DRA objects did, so that the simulated loop
// reads the dump's ResourceSlices, claims and DeviceClasses.
func serveDRA(client *fake.Clientset) {
	d, ok := client.Discovery().(*fakediscovery.FakeDiscovery)
	if !ok {
		return
	}
	list := &metav1.APIResourceList{GroupVersion: simframework.DRAGroupVersion}
	for _, r := range simframework.DRAResources() {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r})
	}
	d.Resources = append(d.Resources, list)
}

// describeAddError names the dump's object that could not be loaded.
func describeAddError(o runtime.Object, err error) error {
	kind := fmt.Sprintf("%T", o)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if m, ok := o.(metav1.Object); ok {
		return fmt.Errorf("loading %s %s/%s from the dump: %w", kind, m.GetNamespace(), m.GetName(), err)
	}
	return fmt.Errorf("loading %s from the dump: %w", kind, err)
}

// refuseWrites lets reads through to the dump's objects and refuses the
// rest, as the live explain's transport does.
func refuseWrites(a k8stesting.Action) (bool, runtime.Object, error) {
	switch a.GetVerb() {
	case "get", "list", "watch":
		return false, nil, nil
	}
	return true, nil, fmt.Errorf("%s %s: %w", a.GetVerb(), a.GetResource().Resource, readonly.ErrWrite)
}
