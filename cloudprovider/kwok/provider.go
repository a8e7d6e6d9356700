package kwok

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Name is the --cloud-provider value of this provider.
const Name = "kwok"

// ConfigMapName is the ConfigMap read when --cloud-config is empty.
const ConfigMapName = "kwok-provider-config"

// Provider is the kwok CloudProvider.
type Provider struct {
	gpuLabel string
	gpuTypes []string
	client   kubernetes.Interface
	store    *stateStore
	clock    clock.PassiveClock
	limiter  *cloudprovider.ResourceLimiter
	rate     *rate.Limiter
	workers  int
	random   func() float64
	readOnly bool // built for explain: nothing started, nothing saved

	mu        sync.Mutex
	groups    map[string]*NodeGroup
	order     []string
	instances map[string]*instance // by name
	queued    map[string]bool      // names handed to a worker
	// gen counts the changes to the pending instances; savedGen is the
	// last gen the state ConfigMap holds. saveMu makes flush the only
	// writer of the ConfigMap at any time.
	gen      uint64
	saveMu   sync.Mutex
	savedGen atomic.Uint64

	work chan string
	wg   sync.WaitGroup
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// Build is the cloudprovider.Builder of the kwok provider.
func Build(ctx context.Context, opts cloudprovider.BuildOptions) (cloudprovider.CloudProvider, error) {
	cfg, err := loadConfig(ctx, opts)
	if err != nil {
		return nil, err
	}
	var p *Provider
	if opts.ReadOnly {
		// Restored, not started: no Node creation, no state saving,
		// no initial instances.
		p, err = restored(ctx, cfg, opts.KubeClient, opts.Options.Namespace, opts.ResourceLimiter)
		if p != nil {
			p.readOnly = true
		}
	} else {
		p, err = New(ctx, cfg, opts.KubeClient, opts.Options.Namespace, opts.ResourceLimiter)
	}
	if err != nil {
		return nil, err
	}
	if opts.InformerFactory != nil {
		if err := p.Watch(opts.InformerFactory); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func loadConfig(ctx context.Context, opts cloudprovider.BuildOptions) (*Config, error) {
	var data []byte
	cmNamespace, cmName := upstreamLocation(opts.Options.Namespace)
	source := fmt.Sprintf("ConfigMap %s/%s", cmNamespace, cmName)
	path := opts.Options.CloudConfig
	cm, err := checkOptIn(ctx, opts.KubeClient, cmNamespace, cmName, opts.Options.KwokProviderEnabled, path != "")
	if err != nil {
		return nil, err
	}
	switch {
	case path != "":
		source = "--cloud-config " + path
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--cloud-config: %w", err)
		}
		data = b
	case cm == nil && len(opts.Options.NodeGroups) > 0:
		data = []byte("nodeGroups: []")
		source = "--nodes"
	case cm == nil:
		return nil, fmt.Errorf("ConfigMap %s/%s not found: create it, or pass --cloud-config or --nodes", cmNamespace, cmName)
	default:
		data = []byte(cm.Data["config"])
	}
	var cfg *Config
	if isUpstreamFormat(data) {
		cfg, err = translateUpstream(ctx, opts.KubeClient, cmNamespace, data)
		if err == nil {
			klog.FromContext(ctx).Info("Read upstream's kwok provider format", "source", source, "nodeGroups", len(cfg.NodeGroups))
		}
	} else {
		cfg, err = ParseConfig(data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if err := cfg.MergeNodeSpecs(opts.Options.NodeGroups); err != nil {
		return nil, err
	}
	if err := cfg.FilterByDiscovery(opts.Options.NodeGroupAutoDiscovery); err != nil {
		return nil, err
	}
	if len(cfg.NodeGroups) == 0 {
		return nil, errors.New("the kwok provider config defines no node groups")
	}
	return cfg, nil
}

// New builds the provider, restores its instances from the cluster and
// starts the workers that create Nodes; they stop when ctx ends.
func New(ctx context.Context, cfg *Config, client kubernetes.Interface, namespace string,
	limiter *cloudprovider.ResourceLimiter) (*Provider, error) {
	p, err := restored(ctx, cfg, client, namespace, limiter)
	if err != nil {
		return nil, err
	}
	return p, p.start(ctx)
}

// restored builds the provider and restores its instances from the
// cluster, starting nothing.
func restored(ctx context.Context, cfg *Config, client kubernetes.Interface, namespace string,
	limiter *cloudprovider.ResourceLimiter) (*Provider, error) {
	if limiter == nil {
		limiter = cloudprovider.NewResourceLimiter(nil, nil)
	}
	p := &Provider{
		gpuLabel: cfg.GPULabel, gpuTypes: cfg.AvailableGPUTypes,
		client: client, store: &stateStore{client: client, namespace: namespace}, clock: clock.RealClock{},
		limiter: limiter, rate: rate.NewLimiter(rate.Limit(cfg.CreateQPS), max(1, int(cfg.CreateQPS))),
		workers: cfg.Workers, random: randomFloat,
		groups: map[string]*NodeGroup{}, instances: map[string]*instance{}, queued: map[string]bool{},
		work: make(chan string, 4096),
	}
	for _, g := range cfg.NodeGroups {
		p.groups[g.Name] = &NodeGroup{provider: p, cfg: g}
		p.order = append(p.order, g.Name)
	}
	if err := p.restore(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// start starts the workers that create Nodes and the scheduler (they stop
// when ctx ends), and creates the groups' initial instances.
func (p *Provider) start(ctx context.Context) error {
	for i := 0; i < p.workers; i++ {
		p.wg.Add(1)
		go p.worker(ctx)
	}
	p.wg.Add(1)
	go p.scheduler(ctx)
	for _, name := range p.order {
		g := p.groups[name]
		p.mu.Lock()
		have := len(g.members())
		p.mu.Unlock()
		if g.cfg.InitialSize > 0 && have == 0 {
			if err := g.increase(ctx, g.cfg.InitialSize, false); err != nil { // no simulated API faults at start-up
				return fmt.Errorf("node group %s: initial size %d: %w", name, g.cfg.InitialSize, err)
			}
			klog.FromContext(ctx).Info("Created the initial instances of a kwok node group", "nodeGroup", name, "size", g.cfg.InitialSize)
		}
	}
	return nil
}

// restore rebuilds the instances: pending ones from the state ConfigMap,
// registered ones from the Nodes that carry a group annotation.
func (p *Provider) restore(ctx context.Context) error {
	pending, err := p.store.load(ctx)
	if err != nil {
		return err
	}
	for _, in := range pending {
		if _, ok := p.groups[in.Group]; ok {
			p.instances[in.Name] = in
		}
	}
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes to restore the kwok provider's instances: %w", err)
	}
	for i := range nodes.Items {
		p.observeNode(&nodes.Items[i])
	}
	klog.FromContext(ctx).Info("Restored kwok provider state", "instances", len(p.instances), "pendingFromConfigMap", len(pending))
	return nil
}

// Watch keeps the instances in step with Nodes deleted or added by others:
// an instance whose Node is deleted is gone, as a VM whose node is removed.
func (p *Provider) Watch(f informers.SharedInformerFactory) error {
	_, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*apiv1.Node); ok {
				p.mu.Lock()
				p.observeNode(n)
				p.mu.Unlock()
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*apiv1.Node); ok {
				p.forgetNode(n)
			}
		},
	})
	return err
}

// observeNode records a Node of one of our groups as a registered instance.
// Callers hold p.mu (or run before the provider is shared).
func (p *Provider) observeNode(n *apiv1.Node) {
	group := n.Annotations[NodeGroupAnnotation]
	if _, ok := p.groups[group]; !ok || cloudprovider.NormalizeProviderID(n.Spec.ProviderID) != ProviderIDPrefix+n.Name {
		return
	}
	in, ok := p.instances[n.Name]
	if !ok {
		in = &instance{Name: n.Name, Group: group, CreatedAt: n.CreationTimestamp.Time}
		p.instances[n.Name] = in
	}
	if !in.registered {
		in.registered = true
		p.changed()
	}
}

// forgetNode drops the registered instance of a deleted Node. One being
// deleted is in the state ConfigMap (as Deleting): its going is a change
// to save. The informer may see the Node go before removeNode's Delete call
// returns, and then removeNode finds the instance gone and records nothing.
func (p *Provider) forgetNode(n *apiv1.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in, ok := p.instances[n.Name]; ok && in.registered {
		delete(p.instances, n.Name)
		if !in.DeleteAt.IsZero() {
			p.changed()
		}
	}
}

// scheduler hands instances whose registration time has come to the workers,
// and saves the pending instances when they changed.
func (p *Provider) scheduler(ctx context.Context) {
	defer p.wg.Done()
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			close(p.work)
			return
		case <-ticker.C:
		}
		now := p.clock.Now()
		p.mu.Lock()
		var due []string
		for name, in := range p.instances {
			if !in.registered && !in.held && in.Error == nil && in.DeleteAt.IsZero() && !in.RegisterAt.IsZero() && !now.Before(in.RegisterAt) &&
				!p.queued[name] {
				due = append(due, name)
			}
		}
		sort.Strings(due)
		var gone []*instance
		for _, in := range p.instances {
			if !in.DeleteAt.IsZero() && !now.Before(in.DeleteAt) {
				gone = append(gone, in)
			}
		}
		for _, name := range due {
			select {
			case p.work <- name:
				p.queued[name] = true
			default: // the queue is full; the next tick retries
			}
		}
		p.mu.Unlock()
		for _, in := range gone {
			p.removeNode(ctx, in)
		}
		p.mu.Lock()
		gen := p.gen
		p.mu.Unlock()
		if saved := p.savedGen.Load(); gen > saved {
			if err := p.flush(ctx, gen); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Saving the kwok provider state; will retry")
			} else if err == nil {
				klog.FromContext(ctx).V(4).Info("Saved the kwok provider state", "generation", gen, "savedBefore", saved)
			}
		}
	}
}

// recordTimeout bounds the save of a change (record).
const recordTimeout = 30 * time.Second

// nodeDeleteRetry is how long the scheduler waits before it tries again to
// delete the Node of a deleted instance.
const nodeDeleteRetry = time.Second

// removeNode deletes the Node of an instance being deleted and then the
// instance. When the Node cannot be deleted (kube-apiserver unreachable)
// the instance stays, listed as Deleting, and the scheduler tries again
// nodeDeleteRetry later.
func (p *Provider) removeNode(ctx context.Context, in *instance) {
	err := p.client.CoreV1().Nodes().Delete(ctx, in.Name, metav1.DeleteOptions{})
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		if cur, ok := p.instances[in.Name]; ok && cur == in {
			in.DeleteAt = p.clock.Now().Add(nodeDeleteRetry)
		}
		if ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Deleting the node of a deleted instance; will retry", "node", in.Name, "retryIn", nodeDeleteRetry)
		}
		return
	}
	if cur, ok := p.instances[in.Name]; ok && cur == in {
		delete(p.instances, in.Name)
		gen := p.changed()
		klog.FromContext(ctx).V(4).Info("Deleted instance gone with its Node", "node", in.Name, "generation", gen)
		return
	}
	klog.FromContext(ctx).V(4).Info("Node of a deleted instance gone; the instance was no longer listed as this one", "node", in.Name)
}

// worker creates the Nodes of due instances.
func (p *Provider) worker(ctx context.Context) {
	defer p.wg.Done()
	for name := range p.work {
		if err := p.rate.Wait(ctx); err != nil {
			return
		}
		p.mu.Lock()
		in, ok := p.instances[name]
		var node *apiv1.Node
		var group *NodeGroup
		if ok && in.DeleteAt.IsZero() {
			group = p.groups[in.Group]
			node = group.newNode(name)
		}
		p.mu.Unlock()
		if node == nil {
			p.mu.Lock()
			delete(p.queued, name)
			p.mu.Unlock()
			continue // deleted while queued
		}
		created, err := p.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && len(group.cfg.Template.Devices) > 0 {
			// Created before a restart: its slices may not have been.
			created, _ = p.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		}
		if created != nil && created.UID != "" && len(group.cfg.Template.Devices) > 0 {
			p.publishSlicesAfter(ctx, group, created, group.cfg.Faults.ResourceSliceDelay.Duration)
		}
		p.mu.Lock()
		delete(p.queued, name)
		in, ok = p.instances[name]
		if ok && (err == nil || apierrors.IsAlreadyExists(err)) {
			in.registered = true
			p.changed()
		}
		p.mu.Unlock()
		if !ok && err == nil {
			// Deleted while its Node was being created: remove the Node
			// too, or it would come back as an instance nobody asked for.
			if err := p.client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				klog.FromContext(ctx).Error(err, "Deleting the node of an instance deleted while it registered", "node", name)
			}
			continue
		}
		if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Creating kwok node; will retry", "node", name)
		}
	}
}

// changed records a change of the pending instances and returns its
// generation, for flush. Callers hold p.mu.
func (p *Provider) changed() uint64 {
	p.gen++
	return p.gen
}

// flush makes the state ConfigMap hold the pending instances as of
// generation want or later. Writers queue on saveMu and each writes the
// whole current state, so a write that waited often finds its change
// already saved by the one before it, and nothing is written twice over.
func (p *Provider) flush(ctx context.Context, want uint64) error {
	p.saveMu.Lock()
	defer p.saveMu.Unlock()
	if p.savedGen.Load() >= want {
		return nil
	}
	p.mu.Lock()
	gen := p.gen
	var pending []*instance
	for _, in := range p.instances {
		if !in.registered || !in.DeleteAt.IsZero() {
			c := *in
			pending = append(pending, &c)
		}
	}
	p.mu.Unlock()
	sort.Slice(pending, func(i, j int) bool { return pending[i].Name < pending[j].Name })
	if err := p.store.save(ctx, pending); err != nil {
		return err
	}
	p.savedGen.Store(gen)
	return nil
}

// record saves a deletion, which has taken effect whether or not it is
// saved: a failure is logged and the scheduler saves it on its next tick.
//
// The save does not end with the caller's context (a removal whose context
// ended once DeleteNodes returned would leave the deletion unsaved): it has
// recordTimeout of its own.
func (p *Provider) record(ctx context.Context, gen uint64, what string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := p.flush(ctx, gen); err != nil {
		klog.FromContext(ctx).Error(err, "Saving the kwok provider state; the scheduler will retry", "change", what)
	}
}

// save writes the current state.
func (p *Provider) save(ctx context.Context) error {
	p.mu.Lock()
	gen := p.gen
	p.mu.Unlock()
	return p.flush(ctx, max(gen, 1))
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return Name }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups(context.Context) ([]cloudprovider.NodeGroup, error) {
	out := make([]cloudprovider.NodeGroup, 0, len(p.order))
	for _, name := range p.order {
		out = append(out, p.groups[name])
	}
	return out, nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider. It also answers
// for placeholder nodes named by instance id.
func (p *Provider) NodeGroupForNode(_ context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.instanceOf(node); in != nil {
		return p.groups[in.Group], nil
	}
	return nil, nil
}

// instanceOf finds the instance of a Node or placeholder node. Callers hold p.mu.
func (p *Provider) instanceOf(node *apiv1.Node) *instance {
	for _, id := range []string{cloudprovider.NormalizeProviderID(node.Spec.ProviderID), node.Name} {
		if len(id) > len(ProviderIDPrefix) && id[:len(ProviderIDPrefix)] == ProviderIDPrefix {
			if in, ok := p.instances[id[len(ProviderIDPrefix):]]; ok {
				return in
			}
		}
	}
	return nil
}

// InstanceOfNode implements cloudprovider.InstanceMatcher: the instance
// named by the Node's provider ID (or, for a placeholder, its name).
func (p *Provider) InstanceOfNode(_ context.Context, node *apiv1.Node) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if in := p.instanceOf(node); in != nil {
		return in.id(), true, nil
	}
	return "", false, nil
}

// HasInstance implements cloudprovider.CloudProvider.
func (p *Provider) HasInstance(_ context.Context, node *apiv1.Node) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.instanceOf(node) != nil, nil
}

// Pricing implements cloudprovider.CloudProvider from the groups' prices.
func (p *Provider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	return pricing{p: p}, nil
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	return p.limiter, nil
}

// GPULabel implements cloudprovider.CloudProvider.
func (p *Provider) GPULabel() string {
	if p.gpuLabel != "" {
		return p.gpuLabel
	}
	return "kwok.x-k8s.io/gpu"
}

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes(context.Context) map[string]struct{} {
	if len(p.gpuTypes) == 0 {
		return nil
	}
	out := make(map[string]struct{}, len(p.gpuTypes))
	for _, t := range p.gpuTypes {
		out[t] = struct{}{}
	}
	return out
}

// GetNodeGpuConfig implements cloudprovider.CloudProvider.
func (p *Provider) GetNodeGpuConfig(_ context.Context, node *apiv1.Node) *cloudprovider.GpuConfig {
	return cloudprovider.LabelledGPUConfig(p.GPULabel(), node)
}

// Refresh implements cloudprovider.CloudProvider; the state is kept live by the informer.
func (p *Provider) Refresh(context.Context) error { return nil }

// Cleanup implements cloudprovider.CloudProvider: it saves the pending
// instances (not when read-only). Nodes are left in place, so a restarted
// autoscaler finds them.
func (p *Provider) Cleanup(ctx context.Context) error {
	if p.readOnly {
		return nil
	}
	return p.save(ctx)
}

// Stop waits for the workers, which end with the context given to New.
func (p *Provider) Stop() { p.wg.Wait() }

func randomFloat() float64 {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<53))
	if err != nil {
		return 0
	}
	return float64(n.Int64()) / (1 << 53)
}

func randomSuffix() string {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 6)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(letters))))
		b[i] = letters[n.Int64()]
	}
	return string(b)
}
