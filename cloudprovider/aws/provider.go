package aws

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Name is the --cloud-provider value of this provider.
const Name = "aws"

// DefaultListInterval is how often the group list is read again (the
// auto-discovery tags, and the --nodes names not kept), and the longest a
// group's description is kept; in between a group is read only when it may
// have changed (cache.go).
const DefaultListInterval = time.Minute

// availableGPUTypes are GPU types named as gpuType names them, for the
// GPU metrics; others are reported as they come.
var availableGPUTypes = []string{"nvidia-t4", "nvidia-a10g", "nvidia-l4", "nvidia-l40s", "nvidia-a100", "nvidia-h100",
	"nvidia-h200", "nvidia-v100", "nvidia-k80", "nvidia-m60", "amd-radeon-pro-v520"}

// Provider is the AWS CloudProvider.
type Provider struct {
	asg       AutoScalingAPI
	ec2       EC2API
	eks       *managedCache // nil: EKS managed node groups are not read (WithEKS)
	region    string
	explicit  []explicitGroup
	discover  []tagDiscoverer
	limiter   *cloudprovider.ResourceLimiter
	clock     clock.PassiveClock
	listEvery time.Duration

	// nodes, when set, lists the cluster's Nodes (hints to read a group).
	nodes NodeLister
	// interrupt reads the interruption queue (nil: none; interruption.go).
	interrupt *interruptions
	// avoid keeps the Spot offerings interrupted lately (nil: none;
	// avoidance.go).
	avoid *avoidance

	// refreshMu serialises Refresh and guards what only it uses.
	refreshMu sync.Mutex
	listed    bool // the group list was read once
	listedAt  time.Time
	cache     map[string]*cachedGroup
	nodeIDs   map[string]bool // the instances that had a Node at the last Refresh
	// ownTerminations are the instances this process terminated (with
	// their group), as long as their group lists them (writes.go).
	ownTerminations map[string]string
	// seq numbers the reads, in the order they start.
	seq atomic.Uint64

	// facts caches what does not change: instance types, subnet zones.
	facts *factCache
	// drift keeps the launch templates' version numbers (drift.go).
	drift *driftCache
	// capacity keeps what tells Spot from On-Demand (capacitytype.go);
	// prices the prices (pricing.go).
	capacity *capacityFacts
	prices   *priceBook
	// reserved keeps the Capacity Reservations the launch templates name
	// (reservations.go).
	reserved *reservationBook
	// blockDrainBefore: a Capacity Block's group has no room left from this
	// long before the block's end (blockend.go).
	blockDrainBefore time.Duration

	mu    sync.Mutex
	state *snapshot
	// increased is, by group, when this process last raised its desired
	// capacity: a failed scaling activity older than that says nothing of
	// the capacity asked since.
	increased map[string]time.Time
	// dirty are the groups this process changed (or found changed) since
	// the last Refresh: the next one reads them.
	dirty map[string]bool
	// refreshedAt is when the last Refresh ran.
	refreshedAt time.Time
	// writeGen counts, by group, the starts and ends of this process's
	// writes; written are the groups written since the last Refresh
	// (writes.go).
	writeGen map[string]int
	written  map[string]bool
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// Option configures a Provider.
type Option func(*Provider)

// WithResourceLimiter sets the cluster-wide resource limits.
func WithResourceLimiter(l *cloudprovider.ResourceLimiter) Option {
	return func(p *Provider) {
		if l != nil {
			p.limiter = l
		}
	}
}

// WithClock sets the clock (group list interval, activity times).
func WithClock(c clock.PassiveClock) Option { return func(p *Provider) { p.clock = c } }

// WithListInterval sets how often the group list is read again.
func WithListInterval(d time.Duration) Option { return func(p *Provider) { p.listEvery = d } }

// Build is the cloudprovider.Builder of the AWS provider.
func Build(ctx context.Context, opts cloudprovider.BuildOptions) (cloudprovider.CloudProvider, error) {
	explicit, err := parseNodeGroups(opts.Options.NodeGroups)
	if err != nil {
		return nil, err
	}
	discover, err := parseDiscoverers(opts.Options.NodeGroupAutoDiscovery)
	if err != nil {
		return nil, err
	}
	if len(explicit) == 0 && len(discover) == 0 {
		klog.FromContext(ctx).Info("WARNING: the aws provider has no node groups: give --nodes=<min>:<max>:<asg-name> or --node-group-auto-discovery=asg:tag=<key>[=<value>],...")
	}
	cc, err := readCloudConfig(opts.Options.CloudConfig)
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(ctx)
	if err != nil {
		return nil, err
	}
	cc.logIgnored(ctx, cfg.Region)
	asgClient, ec2Client := newClientsWith(cfg, cc)
	klog.FromContext(ctx).Info("AWS provider", "region", cfg.Region, "nodeGroups", len(explicit), "autoDiscovery", opts.Options.NodeGroupAutoDiscovery)
	popts := []Option{WithResourceLimiter(opts.ResourceLimiter), WithEKS(newEKSClient(cfg, cc)), WithPricingAPI(newPricingClient(cfg))}
	if q := opts.Options.AWSInterruptionQueue; q != "" && !opts.ReadOnly {
		popts = append(popts, WithInterruptionQueue(newSQSClient(cfg, cc), q, opts.Options.AWSInterruptionRebalance),
			WithInterruptedCapacityAvoidTime(opts.Options.AWSInterruptedCapacityAvoidTime))
		klog.FromContext(ctx).Info("AWS interruption queue", "queue", q, "rebalance", opts.Options.AWSInterruptionRebalance,
			"interruptedCapacityAvoidTime", opts.Options.AWSInterruptedCapacityAvoidTime)
	}
	popts = append(popts, WithCapacityBlockDrainBefore(opts.Options.AWSCapacityBlockDrainBefore))
	if opts.InformerFactory != nil {
		// The Nodes' informer is the core's own (one shared factory).
		popts = append(popts, WithNodeLister(opts.InformerFactory.Core().V1().Nodes().Lister()))
	}
	p := New(asgClient, ec2Client, cfg.Region, explicit, discover, popts...)
	return p, nil
}

// New returns a provider calling through asg and ec2 clients. It reads
// nothing until the first Refresh.
func New(asg AutoScalingAPI, ec2 EC2API, region string, explicit []explicitGroup, discover []tagDiscoverer, opts ...Option) *Provider {
	p := &Provider{asg: asg, ec2: ec2, region: region, explicit: explicit, discover: discover,
		limiter: cloudprovider.NewResourceLimiter(nil, nil), clock: clock.RealClock{}, listEvery: DefaultListInterval,
		facts: newFactCache(), drift: newDriftCache(), capacity: newCapacityFacts(), prices: newPriceBook(), reserved: newReservationBook(), state: &snapshot{groups: map[string]*NodeGroup{}, byInstance: map[string]*NodeGroup{}},
		increased: map[string]time.Time{}, dirty: map[string]bool{}, cache: map[string]*cachedGroup{},
		ownTerminations: map[string]string{}, writeGen: map[string]int{}, written: map[string]bool{}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return Name }

func (p *Provider) current() *snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Refresh implements cloudprovider.CloudProvider. Once per list interval
// it reads the group list (the auto-discovery calls, 100 groups a page,
// whose answers serve as the descriptions of the groups they find, and the
// --nodes groups not kept); it reads by name, 100 per call, the groups that
// may have changed or whose description is a list interval old (see
// cache.go), and the latest scaling activity of the groups read whose
// desired capacity is not all launched (at most every activityEvery, sooner
// after an increase). On error the previous state stays and the error
// (ErrTransient when throttled) aborts the loop.
func (p *Provider) Refresh(ctx context.Context) error {
	p.refreshMu.Lock()
	defer p.refreshMu.Unlock()
	now := p.clock.Now()
	seq := p.seq.Add(1)
	dirty := p.takeDirty()
	listDue := !p.listed || now.Sub(p.listedAt) >= p.listEvery
	// On every Refresh, as it remembers the Nodes for the next; a hinted
	// group counts as changed (and stays due should this Refresh fail).
	for n := range p.nodeHints(ctx) {
		dirty[n] = true
	}
	var listed map[string]groupDesc
	var err error
	if listDue && len(p.discover) > 0 {
		if listed, err = p.discoverGroups(ctx); err != nil {
			p.restoreDirty(dirty)
			return err
		}
	}
	candidates := p.cachedNames()
	if listDue {
		for _, e := range p.explicit {
			if p.cache[e.Name] == nil {
				candidates = append(candidates, e.Name)
			}
		}
	}
	names := p.pad(p.toRead(now, candidates, dirty, listed), listed)
	descs, err := p.describeGroups(ctx, names)
	if err != nil {
		p.restoreDirty(dirty)
		return err
	}
	for n, d := range listed {
		descs[n] = d
	}
	p.mergeReads(now, seq, names, descs, listed != nil, dirty)
	if listDue {
		p.listed, p.listedAt = true, now
		klog.FromContext(ctx).V(2).Info("Read the list of Auto Scaling groups", "groups", len(p.cache))
	}
	p.readReservations(ctx, now) // reservations.go
	snap, err := p.buildSnapshot(ctx, now, descs)
	if err != nil {
		p.restoreDirty(dirty)
		return err
	}
	klog.FromContext(ctx).V(4).Info("Refreshed the Auto Scaling groups", "list", listDue, "read", len(descs), "groups", len(snap.order))
	p.mu.Lock()
	p.state, p.refreshedAt = snap, now
	// Writes from now on are marked afresh; one that ran during this
	// Refresh could not be applied and marked its group dirty.
	p.written = map[string]bool{}
	p.mu.Unlock()
	return nil
}

// Cleanup implements cloudprovider.CloudProvider.
func (p *Provider) Cleanup(context.Context) error { return nil }

// NodeGroups implements cloudprovider.CloudProvider.
func (p *Provider) NodeGroups(context.Context) ([]cloudprovider.NodeGroup, error) {
	s := p.current()
	out := make([]cloudprovider.NodeGroup, 0, len(s.order))
	for _, name := range s.order {
		out = append(out, s.groups[name])
	}
	return out, nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider: the group that
// listed the node's instance (or placeholder) at the last Refresh; nil for
// an instance of no managed group.
func (p *Provider) NodeGroupForNode(_ context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	id, ok := instanceIDOf(node)
	if !ok {
		return nil, nil
	}
	if g := p.current().byInstance[id]; g != nil {
		return g, nil
	}
	return nil, nil
}

// HasInstance implements cloudprovider.CloudProvider: an instance a managed
// group lists exists; of any other the provider knows nothing, and the
// caller judges by the deletion taint.
func (p *Provider) HasInstance(_ context.Context, node *apiv1.Node) (bool, error) {
	id, ok := instanceIDOf(node)
	if ok && p.current().byInstance[id] != nil {
		return true, nil
	}
	return false, cloudprovider.ErrNotImplemented
}

// InstanceOfNode implements cloudprovider.InstanceMatcher the way AWS
// names an instance: by the instance id that ends the Node's provider ID,
// whichever spelling it has (aws:///<zone>/<id> or aws://<zone>/<id>).
func (p *Provider) InstanceOfNode(_ context.Context, node *apiv1.Node) (string, bool, error) {
	id, ok := instanceIDOf(node)
	if !ok {
		return "", false, nil
	}
	g := p.current().byInstance[id]
	if g == nil {
		return "", false, nil
	}
	for _, in := range g.instances {
		if lastSegment(in.Id) == id {
			return in.Id, true, nil
		}
	}
	return "", false, nil
}

// Pricing implements cloudprovider.CloudProvider: On-Demand prices from
// the Price List API (the built-in list as fallback), Spot prices from
// DescribeSpotPriceHistory (pricing.go).
func (p *Provider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	return awsPricing{p: p}, nil
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	return p.limiter, nil
}

// GPULabel implements cloudprovider.CloudProvider.
func (p *Provider) GPULabel() string { return GPULabel }

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes(context.Context) map[string]struct{} {
	out := make(map[string]struct{}, len(availableGPUTypes))
	for _, t := range availableGPUTypes {
		out[t] = struct{}{}
	}
	return out
}

// GetNodeGpuConfig implements cloudprovider.CloudProvider from the GPU label.
func (p *Provider) GetNodeGpuConfig(_ context.Context, node *apiv1.Node) *cloudprovider.GpuConfig {
	t, ok := node.Labels[GPULabel]
	if !ok {
		return nil
	}
	res := gpuResource
	if _, amd := node.Status.Capacity[amdGPUResource]; amd {
		res = amdGPUResource
	}
	return &cloudprovider.GpuConfig{Label: GPULabel, Type: t, ExtendedResourceName: res}
}

// providerIDPrefix starts every provider ID: aws:///<zone>/<instance-id>.
const providerIDPrefix = "aws:///"

// providerID is the provider ID of an instance.
func providerID(zone, id string) string { return providerIDPrefix + zone + "/" + id }

// instanceIDOf returns the instance id in a node's provider ID
// (aws:///<zone>/<id>, or aws://<zone>/<id>).
func instanceIDOf(node *apiv1.Node) (string, bool) {
	pid := node.Spec.ProviderID
	if !strings.HasPrefix(pid, "aws://") {
		return "", false
	}
	i := strings.LastIndex(pid, "/")
	id := pid[i+1:]
	if id == "" {
		return "", false
	}
	return id, true
}

// placeholderPrefix starts the ids of placeholder instances.
const placeholderPrefix = "i-placeholder-"

// placeholderID names the n-th placeholder of a group: the group's name
// made safe for a node name, with a hash of the real one so that names
// differing only in unsafe characters stay apart.
func placeholderID(group string, n int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	var b strings.Builder
	for _, r := range strings.ToLower(group) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	safe := b.String()
	if len(safe) > 100 {
		safe = safe[:100]
	}
	return fmt.Sprintf("%s%s-%08x-%d", placeholderPrefix, safe, h.Sum32(), n)
}

func isPlaceholder(id string) bool { return strings.HasPrefix(id, placeholderPrefix) }

// errGroupGone is the error of a call on a group that is no longer listed.
var errGroupGone = errors.New("the Auto Scaling group is not listed any more")
