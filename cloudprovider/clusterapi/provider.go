package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Name is the --cloud-provider value of this provider.
const Name = "clusterapi"

// GPULabel is the node label that carries the GPU type (upstream's key).
const GPULabel = "cluster-api/accelerator"

// Provider is the Cluster API CloudProvider.
type Provider struct {
	client  dynamic.Interface
	group   string
	version string
	specs   []discoverySpec
	limiter *cloudprovider.ResourceLimiter
	clock   clock.PassiveClock
	mapper  meta.RESTMapper // finds infrastructure templates' resources; nil: none read

	infraMu    sync.Mutex
	infraCache map[string]infraCacheEntry // by group/kind/namespace/name

	// deleteMu makes DeleteNodes calls, of any group, one at a time.
	deleteMu sync.Mutex
	stuckMu  sync.Mutex
	stuck    map[string]bool // marked Machines reported as stuck (reportStuck)
	// ownMu guards ownScales: the autoscaler's own replicas writes per
	// scalable object (scaleKey), the last maxOwnScales of each.
	ownMu     sync.Mutex
	ownScales map[string][]ownScale

	mu      sync.Mutex
	snap    *snapshot
	listers map[string]cache.GenericLister // by kind, after Watch
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// Option configures a Provider.
type Option func(*Provider)

// WithAutoDiscovery sets the --node-group-auto-discovery specs (clusterapi:...).
func WithAutoDiscovery(specs []string) (Option, error) {
	d, err := parseDiscoverySpecs(specs)
	if err != nil {
		return nil, err
	}
	return func(p *Provider) { p.specs = d }, nil
}

// WithResourceLimiter sets the cluster-wide resource limits.
func WithResourceLimiter(l *cloudprovider.ResourceLimiter) Option {
	return func(p *Provider) {
		if l != nil {
			p.limiter = l
		}
	}
}

// WithRESTMapper sets the mapper through which infrastructure machine
// templates (scale from zero from their status.capacity) are found.
func WithRESTMapper(m meta.RESTMapper) Option { return func(p *Provider) { p.mapper = m } }

// WithClock sets the clock that stamps the delete-machine annotation and
// times how long a marked Machine waits for its deletion.
func WithClock(c clock.PassiveClock) Option { return func(p *Provider) { p.clock = c } }

// New returns a provider reading group/version objects through client.
// It lists nothing until the first Refresh.
func New(client dynamic.Interface, group, version string, opts ...Option) *Provider {
	p := &Provider{client: client, group: group, version: version, limiter: cloudprovider.NewResourceLimiter(nil, nil),
		clock: clock.RealClock{}, snap: &snapshot{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Build is the cloudprovider.Builder of the Cluster API provider.
func Build(ctx context.Context, opts cloudprovider.BuildOptions) (cloudprovider.CloudProvider, error) {
	logger := klog.FromContext(ctx)
	cfg, err := managementConfig(opts)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = float32(opts.Options.KubeClientQPS), opts.Options.KubeClientBurst
	cfg.UserAgent = opts.Options.UserAgent
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the management cluster's dynamic client: %w", err)
	}
	group := DefaultGroup
	if g := os.Getenv(GroupEnv); g != "" {
		group = g
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the management cluster's discovery client: %w", err)
	}
	version := os.Getenv(VersionEnv)
	if version == "" {
		if version, err = preferredVersion(dc, group); err != nil {
			return nil, err
		}
	}
	withPools, err := servesMachinePools(dc, group, version)
	if err != nil {
		return nil, err
	}
	discoveryOpt, err := WithAutoDiscovery(opts.Options.NodeGroupAutoDiscovery)
	if err != nil {
		return nil, err
	}
	if len(opts.Options.NodeGroups) > 0 {
		logger.Info("Ignoring --nodes: the clusterapi provider finds its node groups by their size annotations", "nodes", opts.Options.NodeGroups)
	}
	logger.Info("Cluster API provider", "group", group, "version", version,
		"managementKubeconfig", opts.Options.CloudConfig, "autoDiscovery", opts.Options.NodeGroupAutoDiscovery)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	p := New(client, group, version, discoveryOpt, WithResourceLimiter(opts.ResourceLimiter), WithRESTMapper(mapper))
	if err := p.Watch(ctx, withPools); err != nil {
		return nil, err
	}
	if err := p.Refresh(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// managementConfig is the REST config of the management cluster: the
// kubeconfig at --cloud-config; else, with
// --clusterapi-cloud-config-authoritative, the in-cluster configuration
// (the autoscaler runs in the management cluster and --kubeconfig names the
// workload cluster); else the autoscaler's own cluster.
func managementConfig(opts cloudprovider.BuildOptions) (*rest.Config, error) {
	o := opts.Options
	if o.CloudConfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.CloudConfig)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config %s as the management cluster's kubeconfig: %w", o.CloudConfig, err)
		}
		return cfg, nil
	}
	if (o.Kubeconfig != "" || o.KubernetesURL != "") && !o.ClusterAPICloudConfigAuthoritative {
		cfg, err := clientcmd.BuildConfigFromFlags(o.KubernetesURL, o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig for the management cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		if o.ClusterAPICloudConfigAuthoritative {
			return nil, fmt.Errorf("--clusterapi-cloud-config-authoritative without --cloud-config: the management cluster is the in-cluster one: %w", err)
		}
		return nil, fmt.Errorf("in-cluster configuration for the management cluster: %w", err)
	}
	return cfg, nil
}

// servesMachinePools reports whether group/version has MachinePools (an
// optional part of Cluster API).
func servesMachinePools(dc discovery.ServerResourcesInterface, group, version string) (bool, error) {
	list, err := dc.ServerResourcesForGroupVersion(group + "/" + version)
	if err != nil {
		return false, fmt.Errorf("discovering the resources of %s/%s: %w", group, version, err)
	}
	for _, r := range list.APIResources {
		if r.Name == resourceOf[kindMachinePool] {
			return true, nil
		}
	}
	return false, nil
}

func preferredVersion(dc discovery.ServerGroupsInterface, group string) (string, error) {
	groups, err := dc.ServerGroups()
	if err != nil {
		return "", fmt.Errorf("discovering the API version of %s: %w", group, err)
	}
	for _, g := range groups.Groups {
		if g.Name == group {
			if g.PreferredVersion.Version != "" {
				return g.PreferredVersion.Version, nil
			}
			if len(g.Versions) > 0 {
				return g.Versions[0].Version, nil
			}
		}
	}
	return "", fmt.Errorf("the management cluster serves no API group %s (are Cluster API's CRDs installed? set %s/%s to override)",
		group, GroupEnv, VersionEnv)
}

func (p *Provider) gvr(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: p.group, Version: p.version, Resource: resourceOf[kind]}
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return Name }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups(context.Context) ([]cloudprovider.NodeGroup, error) {
	s := p.current()
	out := make([]cloudprovider.NodeGroup, 0, len(s.groups))
	for _, g := range s.groups {
		out = append(out, g)
	}
	return out, nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider: the group of
// the node's Machine (by provider ID or placeholder id, else by nodeRef), or
// of a MachinePool listing its provider ID; only within the autoscaler's own
// cluster (see scope).
func (p *Provider) NodeGroupForNode(_ context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	s := p.current()
	if g := s.groupOfNode(node); g != nil {
		return g, nil
	}
	return nil, nil
}

// HasInstance implements cloudprovider.CloudProvider: a node whose Machine
// is known has an instance; one that names a Machine that is gone (from
// its own cluster) has not.
func (p *Provider) HasInstance(_ context.Context, node *apiv1.Node) (bool, error) {
	s := p.current()
	if m := s.machineOfNode(node); m != nil {
		return true, nil
	}
	if name := node.Annotations[NodeMachineAnnotation]; name != "" && s.listed {
		for _, m := range s.machines {
			if m.GetName() == name && s.scope.machineMayBe(node, m) {
				return true, nil
			}
		}
		return false, nil
	}
	return false, cloudprovider.ErrNotImplemented
}

// InstanceOfNode implements cloudprovider.InstanceMatcher the way Cluster
// API matches: the node's Machine (by provider ID, else by the Machine's
// status.nodeRef, so a Node whose provider ID is spelt otherwise than its
// Machine's, or that has none, is still found), else the MachinePool that
// lists its provider ID. Before the first listing it cannot tell.
func (p *Provider) InstanceOfNode(_ context.Context, node *apiv1.Node) (string, bool, error) {
	s := p.current()
	if !s.listed {
		return "", false, errors.New("the Cluster API objects have not been listed yet")
	}
	if m := s.machineOfNode(node); m != nil {
		if g := s.groupOfMachine[m]; g != nil {
			return machineInstanceID(m), true, nil
		}
		return "", false, nil
	}
	if g := s.groupOfNode(node); g != nil && g.kind == kindMachinePool {
		return node.Spec.ProviderID, true, nil
	}
	return "", false, nil
}

// Pricing implements cloudprovider.CloudProvider.
func (p *Provider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	return nil, cloudprovider.ErrNotImplemented
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	return p.limiter, nil
}

// GPULabel implements cloudprovider.CloudProvider.
func (p *Provider) GPULabel() string { return GPULabel }

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes(context.Context) map[string]struct{} { return nil }

// GetNodeGpuConfig implements cloudprovider.CloudProvider.
func (p *Provider) GetNodeGpuConfig(_ context.Context, node *apiv1.Node) *cloudprovider.GpuConfig {
	return cloudprovider.LabelledGPUConfig(GPULabel, node)
}

// Cleanup implements cloudprovider.CloudProvider.
func (p *Provider) Cleanup(context.Context) error { return nil }

func (p *Provider) current() *snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap
}

var kinds = []string{kindMachineDeployment, kindMachineSet, kindMachinePool, kindMachine}

// Watch makes Refresh read from informers instead of listing from the API
// server in every loop. The informers run until ctx ends; Watch returns once
// they are synced. withPools is false when the server has no MachinePools.
func (p *Provider) Watch(ctx context.Context, withPools bool) error {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(p.client, 0, namespaceOf(p.specs), nil)
	listers := map[string]cache.GenericLister{}
	for _, kind := range kinds {
		if kind == kindMachinePool && !withPools {
			continue
		}
		listers[kind] = f.ForResource(p.gvr(kind)).Lister()
	}
	f.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for gvr, ok := range f.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return fmt.Errorf("watching %s: the cache did not sync: %w", gvr.Resource, context.Cause(syncCtx))
		}
	}
	p.mu.Lock()
	p.listers = listers
	p.mu.Unlock()
	return nil
}

// Refresh implements cloudprovider.CloudProvider: it reads the scalable
// resources and Machines once (from the informers after Watch, else by
// listing) and rebuilds the node groups from them.
func (p *Provider) Refresh(ctx context.Context) error {
	p.mu.Lock()
	listers := p.listers
	p.mu.Unlock()
	ns := namespaceOf(p.specs)
	lists := map[string][]unstructured.Unstructured{}
	for _, kind := range kinds {
		if listers != nil {
			if l, ok := listers[kind]; ok {
				objs, err := l.List(labels.Everything())
				if err != nil {
					return fmt.Errorf("listing %s.%s/%s from the cache: %w", resourceOf[kind], p.group, p.version, err)
				}
				for _, o := range objs {
					if u, ok := o.(*unstructured.Unstructured); ok {
						lists[kind] = append(lists[kind], *u)
					}
				}
			}
			continue
		}
		l, err := p.client.Resource(p.gvr(kind)).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			if kind == kindMachinePool && apierrors.IsNotFound(err) {
				continue // MachinePools are optional in Cluster API
			}
			return fmt.Errorf("listing %s.%s/%s: %w", resourceOf[kind], p.group, p.version, err)
		}
		lists[kind] = l.Items
	}
	s := p.buildSnapshot(ctx, lists)
	p.mu.Lock()
	p.snap = s
	p.mu.Unlock()
	return nil
}

// snapshot is what one Refresh saw.
type snapshot struct {
	listed   bool
	scope    scope
	groups   []*NodeGroup
	machines []*unstructured.Unstructured
	// groupOfMachine is the group of each Machine that has one.
	groupOfMachine map[*unstructured.Unstructured]*NodeGroup
	// groupsByInstance maps an instance id (provider ID or placeholder) to
	// the groups listing it; machinesByInstance and machinesByNode (nodeRef)
	// to the Machines that have it, whatever their Cluster.
	groupsByInstance   map[string][]*NodeGroup
	machinesByInstance map[string][]*unstructured.Unstructured
	machinesByNormID   map[string][]*unstructured.Unstructured // by NormalizeProviderID of the provider ID
	machinesByNode     map[string][]*unstructured.Unstructured
}

// machineOfNode is the one Machine of the autoscaler's own cluster that has
// the node's provider ID, else whose nodeRef names it; nil when there is
// none, or several that the node's annotations cannot tell apart.
func (s *snapshot) machineOfNode(node *apiv1.Node) *unstructured.Unstructured {
	may := func(m *unstructured.Unstructured) bool { return s.scope.machineMayBe(node, m) }
	if node.Spec.ProviderID != "" {
		if m, ok := only(s.machinesByInstance[node.Spec.ProviderID], may); ok {
			return m
		}
		// The same ID spelt otherwise (aws://zone/id for aws:///zone/id).
		if m, ok := only(s.machinesByNormID[cloudprovider.NormalizeProviderID(node.Spec.ProviderID)], may); ok {
			return m
		}
	}
	m, _ := only(s.machinesByNode[node.Name], may)
	return m
}

func (s *snapshot) groupOfNode(node *apiv1.Node) *NodeGroup {
	if m := s.machineOfNode(node); m != nil {
		return s.groupOfMachine[m]
	}
	if node.Spec.ProviderID == "" {
		return nil
	}
	g, _ := only(s.groupsByInstance[node.Spec.ProviderID], func(g *NodeGroup) bool { return s.scope.groupMayHave(node, g) })
	return g
}

func key(namespace, name string) string { return namespace + "/" + name }

func (p *Provider) buildSnapshot(ctx context.Context, lists map[string][]unstructured.Unstructured) *snapshot {
	logger := klog.FromContext(ctx)
	s := &snapshot{listed: true, groupOfMachine: map[*unstructured.Unstructured]*NodeGroup{},
		groupsByInstance: map[string][]*NodeGroup{}, machinesByInstance: map[string][]*unstructured.Unstructured{},
		machinesByNormID: map[string][]*unstructured.Unstructured{},
		machinesByNode:   map[string][]*unstructured.Unstructured{}}
	// Machines by owner.
	machinesOf := map[string][]*unstructured.Unstructured{} // kind/ns/name -> machines
	for i := range lists[kindMachine] {
		m := &lists[kindMachine][i]
		s.machines = append(s.machines, m)
		if _, ours := m.GetAnnotations()[OwnDeletionAnnotation]; ours {
			p.reportStuck(ctx, m)
		}
		s.machinesByInstance[machineInstanceID(m)] = append(s.machinesByInstance[machineInstanceID(m)], m)
		norm := cloudprovider.NormalizeProviderID(machineInstanceID(m))
		s.machinesByNormID[norm] = append(s.machinesByNormID[norm], m)
		if n := nodeRefName(m); n != "" {
			s.machinesByNode[n] = append(s.machinesByNode[n], m)
		}
		for _, kind := range []string{kindMachineSet, kindMachinePool} {
			if owner := ownerOfKind(m, p.group, kind); owner != "" {
				machinesOf[kind+"/"+key(m.GetNamespace(), owner)] = append(machinesOf[kind+"/"+key(m.GetNamespace(), owner)], m)
			}
		}
	}
	setsOf := map[string][]string{} // MachineDeployment ns/name -> MachineSet ns/names
	var candidates []*NodeGroup
	allSets := make([]*unstructured.Unstructured, 0, len(lists[kindMachineSet]))
	for i := range lists[kindMachineSet] {
		ms := &lists[kindMachineSet][i]
		allSets = append(allSets, ms)
		if md := ownerOfKind(ms, p.group, kindMachineDeployment); md != "" {
			setsOf[key(ms.GetNamespace(), md)] = append(setsOf[key(ms.GetNamespace(), md)], key(ms.GetNamespace(), ms.GetName()))
			continue
		}
		candidates = append(candidates, &NodeGroup{kind: kindMachineSet, obj: ms,
			machines: machinesOf[kindMachineSet+"/"+key(ms.GetNamespace(), ms.GetName())]})
	}
	for i := range lists[kindMachineDeployment] {
		md := &lists[kindMachineDeployment][i]
		g := &NodeGroup{kind: kindMachineDeployment, obj: md, sets: setsOfDeployment(p.group, md, allSets)}
		for _, ms := range setsOf[key(md.GetNamespace(), md.GetName())] {
			g.machines = append(g.machines, machinesOf[kindMachineSet+"/"+ms]...)
		}
		candidates = append(candidates, g)
	}
	for i := range lists[kindMachinePool] {
		mp := &lists[kindMachinePool][i]
		candidates = append(candidates, &NodeGroup{kind: kindMachinePool, obj: mp,
			machines: machinesOf[kindMachinePool+"/"+key(mp.GetNamespace(), mp.GetName())]})
	}
	var pausedClusters []clusterKey
	for _, g := range candidates {
		if !matchesAny(p.specs, g.obj) {
			continue
		}
		minSize, maxSize, err := parseSizes(g.obj)
		if errors.Is(err, errNotAGroup) {
			continue
		}
		if err != nil {
			logger.Error(err, "Skipping a Cluster API node group with invalid size annotations",
				"kind", g.kind, "object", klog.KObj(g.obj))
			continue
		}
		if paused(g.obj) {
			// Cluster API does not reconcile it: not a node group (no
			// scale-up, and its nodes belong to no group, so none is
			// scaled down), as upstream. Its Cluster stays the autoscaler's.
			logger.V(4).Info("Discovered a paused node group; leaving it out", "kind", g.kind, "object", klog.KObj(g.obj),
				"annotation", PausedAnnotation)
			pausedClusters = append(pausedClusters, clusterOf(g.obj))
			continue
		}
		target, _ := replicas(g.obj)
		if ahead, ok := p.ownReplicasAhead(g.scaleKey(), target, g.obj.GetResourceVersion()); ok {
			logger.V(2).Info("The cache has not shown the autoscaler's own replicas write yet; counting the write",
				"kind", g.kind, "object", klog.KObj(g.obj), "cached", target, "written", ahead)
			target = ahead
		}
		g.provider, g.minSize, g.maxSize, g.target = p, minSize, maxSize, target
		g.instances = g.buildInstances()
		s.groups = append(s.groups, g)
		for _, in := range g.instances {
			s.groupsByInstance[in.Id] = append(s.groupsByInstance[in.Id], g)
		}
		for _, m := range g.machines {
			s.groupOfMachine[m] = g
		}
	}
	s.scope = scope{specs: p.specs, groups: map[clusterKey]bool{}}
	for _, g := range s.groups {
		s.scope.groups[clusterOf(g.obj)] = true
	}
	for _, c := range pausedClusters {
		s.scope.groups[c] = true
	}
	sort.Slice(s.groups, func(i, j int) bool { return s.groups[i].Id() < s.groups[j].Id() })
	logger.V(4).Info("Cluster API node groups", "groups", len(s.groups), "machines", len(s.machines))
	return s
}
