package externalgrpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
)

// Name is the --cloud-provider value of this provider.
const Name = "externalgrpc"

// MaxSize bounds every size a server may report (a group's max, a target,
// an instance count); a larger one is taken for a broken answer.
const MaxSize = 1_000_000

// ErrBadAnswer marks an answer of the server that makes no sense; the group
// it concerns is left out of the loop.
var ErrBadAnswer = errors.New("invalid answer from the external gRPC cloud provider")

// Provider is the CloudProvider backed by an external gRPC server.
type Provider struct {
	client  protos.CloudProviderClient
	conn    *grpc.ClientConn
	timeout time.Duration
	limiter *cloudprovider.ResourceLimiter
	calls   atomic.Int64

	// loadMu serialises the loading of the node groups of a loop.
	loadMu sync.Mutex

	mu sync.Mutex
	// gen counts the Refresh calls; per-loop caches carry the gen they
	// were filled in, and are void in any other.
	gen     uint64
	loaded  bool
	groups  []*NodeGroup
	byID    map[string]*NodeGroup
	skipped map[string]error
	forNode map[string]string // node key -> group id ("" = not autoscaled)
	// byInstance maps the instance ids the listed groups reported this loop
	// to their group, so that NodeGroupForNode needs no call for them.
	byInstance map[string]string
	// unlisted are the groups named by NodeGroupForNode but not listed,
	// logged once per loop.
	unlisted map[string]bool
	gpuLabel *string
	gpuTypes map[string]struct{}
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// Option configures a Provider.
type Option func(*options)

type options struct {
	limiter  *cloudprovider.ResourceLimiter
	dialOpts []grpc.DialOption
}

// WithResourceLimiter sets the cluster-wide limits GetResourceLimiter returns.
func WithResourceLimiter(l *cloudprovider.ResourceLimiter) Option {
	return func(o *options) { o.limiter = l }
}

// WithDialOptions adds gRPC dial options (tests use a custom dialer).
func WithDialOptions(d ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = append(o.dialOpts, d...) }
}

// Build is the cloudprovider.Builder of the provider.
func Build(ctx context.Context, opts cloudprovider.BuildOptions) (cloudprovider.CloudProvider, error) {
	path := opts.Options.CloudConfig
	if path == "" {
		return nil, errors.New("--cloud-config is required by the externalgrpc cloud provider (a YAML file with at least the server's address)")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config %s: %w", path, err)
	}
	return New(ctx, cfg, WithResourceLimiter(opts.ResourceLimiter))
}

// New connects to the server of cfg. The connection is made lazily and
// re-made with back-off whenever it breaks; calls made while it is down fail
// at once (or after the timeout) rather than wait for it.
func New(ctx context.Context, cfg *Config, opts ...Option) (*Provider, error) {
	o := options{}
	for _, f := range opts {
		f(&o)
	}
	if o.limiter == nil {
		o.limiter = cloudprovider.NewResourceLimiter(nil, nil)
	}
	logger := klog.FromContext(ctx)
	var creds credentials.TransportCredentials
	if cfg.TLS() {
		tc, err := clientTLS(cfg)
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	} else {
		logger.Info("WARNING: the external gRPC cloud provider connection is NOT encrypted nor authenticated; "+
			"set key, cert and cacert in --cloud-config for mTLS", "address", cfg.Address)
		creds = insecure.NewCredentials()
	}
	bc := backoff.DefaultConfig
	bc.MaxDelay = 5 * time.Second
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: cfg.Timeout.Duration}),
	}, o.dialOpts...)
	conn, err := grpc.NewClient(cfg.Address, dial...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the external gRPC cloud provider at %q: %w", cfg.Address, err)
	}
	logger.Info("Using the external gRPC cloud provider", "address", cfg.Address, "mTLS", cfg.TLS(), "timeout", cfg.Timeout.Duration)
	return &Provider{client: protos.NewCloudProviderClient(conn), conn: conn, timeout: cfg.Timeout.Duration,
		limiter: o.limiter, byID: map[string]*NodeGroup{}, skipped: map[string]error{}, forNode: map[string]string{},
		unlisted: map[string]bool{}}, nil
}

func clientTLS(cfg *Config) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("loading the client certificate %q and key %q: %w", cfg.Cert, cfg.Key, err)
	}
	ca, err := os.ReadFile(cfg.CACert)
	if err != nil {
		return nil, fmt.Errorf("reading cacert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("cacert %q holds no PEM certificate", cfg.CACert)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Calls counts the RPCs made so far.
func (p *Provider) Calls() int64 { return p.calls.Load() }

// callCtx bounds one RPC by the configured timeout and counts it.
func (p *Provider) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	p.calls.Add(1)
	return context.WithTimeout(ctx, p.timeout)
}

// rpcError translates an RPC failure: Unimplemented is ErrNotImplemented;
// an unreachable server (and, for calls that change nothing, a timeout) is
// ErrTransient.
func rpcError(op string, err error, readOnly bool) error {
	switch status.Code(err) {
	case codes.Unimplemented:
		return fmt.Errorf("%s: %w (%w)", op, cloudprovider.ErrNotImplemented, err)
	case codes.Unavailable:
		return fmt.Errorf("%s: %w: %w", op, cloudprovider.ErrTransient, err)
	case codes.DeadlineExceeded:
		if readOnly {
			return fmt.Errorf("%s: %w: %w", op, cloudprovider.ErrTransient, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func badAnswer(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadAnswer, fmt.Sprintf(format, args...))
}

// Name implements cloudprovider.CloudProvider.
func (p *Provider) Name() string { return Name }

// Refresh implements cloudprovider.CloudProvider: it forwards the call and
// voids every per-loop cache.
func (p *Provider) Refresh(ctx context.Context) error {
	p.mu.Lock()
	p.gen++
	p.loaded, p.groups, p.byID, p.skipped, p.forNode = false, nil, map[string]*NodeGroup{}, map[string]error{}, map[string]string{}
	p.byInstance, p.unlisted = nil, map[string]bool{}
	haveGPU := p.gpuLabel != nil && p.gpuTypes != nil
	p.mu.Unlock()
	cctx, cancel := p.callCtx(ctx)
	defer cancel()
	if _, err := p.client.Refresh(cctx, &protos.RefreshRequest{}); err != nil {
		if err := rpcError("refreshing the external gRPC cloud provider", err, true); !errors.Is(err, cloudprovider.ErrNotImplemented) {
			return err
		}
	}
	if !haveGPU {
		p.loadGPU(ctx)
	}
	return nil
}

// Cleanup implements cloudprovider.CloudProvider: it forwards the call and
// closes the connection.
func (p *Provider) Cleanup(ctx context.Context) error {
	cctx, cancel := p.callCtx(ctx)
	defer cancel()
	_, err := p.client.Cleanup(cctx, &protos.CleanupRequest{})
	if cerr := p.conn.Close(); cerr != nil {
		klog.FromContext(ctx).Error(cerr, "Closing the external gRPC cloud provider connection")
	}
	if err != nil {
		if err := rpcError("cleaning up the external gRPC cloud provider", err, false); !errors.Is(err, cloudprovider.ErrNotImplemented) {
			return err
		}
	}
	return nil
}

// NodeGroups implements cloudprovider.CloudProvider. The first call after a
// Refresh reads the groups and, for each, its target size and instances,
// and leaves out (with an error log) every group with a senseless answer.
func (p *Provider) NodeGroups(ctx context.Context) ([]cloudprovider.NodeGroup, error) {
	groups, err := p.load(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]cloudprovider.NodeGroup, len(groups))
	for i, g := range groups {
		out[i] = g
	}
	return out, nil
}

func (p *Provider) load(ctx context.Context) ([]*NodeGroup, error) {
	p.loadMu.Lock()
	defer p.loadMu.Unlock()
	p.mu.Lock()
	if p.loaded {
		groups := p.groups
		p.mu.Unlock()
		return groups, nil
	}
	gen := p.gen
	p.mu.Unlock()

	logger := klog.FromContext(ctx)
	cctx, cancel := p.callCtx(ctx)
	resp, err := p.client.NodeGroups(cctx, &protos.NodeGroupsRequest{})
	cancel()
	if err != nil {
		return nil, rpcError("listing the node groups", err, true)
	}
	count := map[string]int{}
	for _, pg := range resp.GetNodeGroups() {
		count[pg.GetId()]++
	}
	var candidates []*NodeGroup
	skipped := map[string]error{}
	for _, pg := range resp.GetNodeGroups() {
		id := pg.GetId()
		if err := checkGroup(pg, count[id]); err != nil {
			logger.Error(err, "Leaving out a node group the external gRPC cloud provider described badly", "nodeGroup", id)
			skipped[id] = err
			continue
		}
		candidates = append(candidates, p.newGroup(pg))
	}
	errs := p.primeAll(ctx, candidates, gen)
	var groups []*NodeGroup
	for i, g := range candidates {
		switch err := errs[i]; {
		case err == nil:
			groups = append(groups, g)
		case errors.Is(err, ErrBadAnswer):
			logger.Error(err, "Leaving out a node group the external gRPC cloud provider answered badly about", "nodeGroup", g.id)
			skipped[g.id] = err
		default:
			return nil, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return groups, nil // a Refresh came in between: serve, but do not keep
	}
	p.loaded, p.groups, p.skipped = true, groups, skipped
	p.byInstance = indexInstances(ctx, groups)
	for _, g := range groups {
		p.byID[g.id] = g
	}
	logger.V(4).Info("Read the external gRPC cloud provider's node groups", "nodeGroups", len(groups), "skipped", len(skipped))
	return groups, nil
}

// primeConcurrency bounds the groups whose target and instances are read at once.
const primeConcurrency = 8

// primeAll primes the groups, a few at a time, and returns each one's error.
func (p *Provider) primeAll(ctx context.Context, groups []*NodeGroup, gen uint64) []error {
	errs := make([]error, len(groups))
	sem := make(chan struct{}, primeConcurrency)
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = g.prime(ctx, gen)
		}()
	}
	wg.Wait()
	return errs
}

// indexInstances maps the instances the groups listed (primed this loop) to
// their group. An instance two groups claim is left out, with an error log:
// the server's NodeGroupForNode decides for it.
func indexInstances(ctx context.Context, groups []*NodeGroup) map[string]string {
	index := map[string]string{}
	ambiguous := map[string]bool{}
	for _, g := range groups {
		g.mu.Lock()
		for _, in := range g.listed {
			if other, dup := index[in.Id]; dup && other != g.id {
				klog.FromContext(ctx).Error(badAnswer("instance %q is listed by node groups %q and %q", in.Id, other, g.id),
					"Asking the server for the instance's node group")
				ambiguous[in.Id] = true
			}
			index[in.Id] = g.id
		}
		g.mu.Unlock()
	}
	for id := range ambiguous {
		delete(index, id)
	}
	return index
}

// checkGroup validates a node group description; n is how many groups of
// the answer carry its id.
func checkGroup(pg *protos.NodeGroup, n int) error {
	switch {
	case pg == nil || pg.GetId() == "":
		return badAnswer("a node group without an id")
	case n > 1:
		return badAnswer("node group %q is listed %d times", pg.GetId(), n)
	case pg.GetMinSize() < 0 || pg.GetMaxSize() < pg.GetMinSize() || pg.GetMaxSize() > MaxSize:
		return badAnswer("node group %q has sizes min %d, max %d (want 0 <= min <= max <= %d)",
			pg.GetId(), pg.GetMinSize(), pg.GetMaxSize(), MaxSize)
	}
	return nil
}

// NodeGroupForNode implements cloudprovider.CloudProvider. Answers are
// kept until the next Refresh. A group the server names but did not list
// (or listed badly) is an error.
func (p *Provider) NodeGroupForNode(ctx context.Context, node *apiv1.Node) (cloudprovider.NodeGroup, error) {
	if _, err := p.load(ctx); err != nil {
		return nil, err
	}
	key := nodeKey(node)
	p.mu.Lock()
	id, cached := p.forNode[key]
	if !cached && node.Spec.ProviderID != "" {
		id, cached = p.byInstance[node.Spec.ProviderID]
	}
	gen := p.gen
	p.mu.Unlock()
	if !cached {
		cctx, cancel := p.callCtx(ctx)
		resp, err := p.client.NodeGroupForNode(cctx, &protos.NodeGroupForNodeRequest{Node: toProtoNode(node)})
		cancel()
		if err != nil {
			return nil, rpcError(fmt.Sprintf("finding the node group of node %q", node.Name), err, true)
		}
		pg := resp.GetNodeGroup()
		id = pg.GetId()
		if id != "" {
			if err := p.checkSameGroup(pg); err != nil {
				klog.FromContext(ctx).Error(err, "Ignoring the external gRPC cloud provider's node group of a node", "node", node.Name)
				return nil, err
			}
		}
		p.mu.Lock()
		if p.gen == gen {
			p.forNode[key] = id
		}
		p.mu.Unlock()
	}
	if id == "" {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.byID[id]; ok {
		return g, nil
	}
	if err, ok := p.skipped[id]; ok {
		return nil, fmt.Errorf("node %q is in node group %q, left out of this loop: %w", node.Name, id, err)
	}
	err := badAnswer("node %q is in node group %q, which the server did not list", node.Name, id)
	if !p.unlisted[id] {
		p.unlisted[id] = true // one log line per group and loop
		klog.FromContext(ctx).Error(err, "Ignoring the external gRPC cloud provider's node group of a node", "node", node.Name)
	}
	return nil, err
}

// checkSameGroup checks a group named in an answer against the listed one.
func (p *Provider) checkSameGroup(pg *protos.NodeGroup) error {
	p.mu.Lock()
	g, ok := p.byID[pg.GetId()]
	p.mu.Unlock()
	if !ok {
		return nil // reported by the caller
	}
	if int(pg.GetMinSize()) != g.min || int(pg.GetMaxSize()) != g.max {
		return badAnswer("node group %q is described with min %d, max %d, but listed with min %d, max %d",
			pg.GetId(), pg.GetMinSize(), pg.GetMaxSize(), g.min, g.max)
	}
	return nil
}

// nodeKey identifies a node (or a placeholder node of an instance) in caches.
func nodeKey(n *apiv1.Node) string {
	if n.Spec.ProviderID != "" {
		return n.Spec.ProviderID
	}
	return "name:" + n.Name
}

func toProtoNode(n *apiv1.Node) *protos.ExternalGrpcNode {
	return &protos.ExternalGrpcNode{ProviderID: n.Spec.ProviderID, Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}
}

// HasInstance implements cloudprovider.CloudProvider: the protocol has no
// such call, so the caller judges by the deletion taint.
func (p *Provider) HasInstance(context.Context, *apiv1.Node) (bool, error) {
	return false, cloudprovider.ErrNotImplemented
}

// GetResourceLimiter implements cloudprovider.CloudProvider.
func (p *Provider) GetResourceLimiter(context.Context) (*cloudprovider.ResourceLimiter, error) {
	return p.limiter, nil
}

// loadGPU reads the GPU label and types; each is kept for good once read
// (Unimplemented reads as none).
func (p *Provider) loadGPU(ctx context.Context) {
	logger := klog.FromContext(ctx)
	p.mu.Lock()
	needLabel, needTypes := p.gpuLabel == nil, p.gpuTypes == nil
	p.mu.Unlock()
	if needLabel {
		cctx, cancel := p.callCtx(ctx)
		resp, err := p.client.GPULabel(cctx, &protos.GPULabelRequest{})
		cancel()
		if err == nil || status.Code(err) == codes.Unimplemented {
			label := resp.GetLabel()
			p.mu.Lock()
			p.gpuLabel = &label
			p.mu.Unlock()
		} else {
			logger.Error(err, "Reading the GPU label from the external gRPC cloud provider; will retry")
		}
	}
	if needTypes {
		cctx, cancel := p.callCtx(ctx)
		resp, err := p.client.GetAvailableGPUTypes(cctx, &protos.GetAvailableGPUTypesRequest{})
		cancel()
		if err == nil || status.Code(err) == codes.Unimplemented {
			types := map[string]struct{}{}
			for t := range resp.GetGpuTypes() {
				types[t] = struct{}{}
			}
			p.mu.Lock()
			p.gpuTypes = types
			p.mu.Unlock()
		} else {
			logger.Error(err, "Reading the GPU types from the external gRPC cloud provider; will retry")
		}
	}
}

// GPULabel implements cloudprovider.CloudProvider; it is "" until read.
func (p *Provider) GPULabel() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gpuLabel == nil {
		return ""
	}
	return *p.gpuLabel
}

// GetAvailableGPUTypes implements cloudprovider.CloudProvider.
func (p *Provider) GetAvailableGPUTypes(ctx context.Context) map[string]struct{} {
	p.mu.Lock()
	missing := p.gpuTypes == nil
	p.mu.Unlock()
	if missing {
		p.loadGPU(ctx)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gpuTypes
}

// GetNodeGpuConfig implements cloudprovider.CloudProvider from the GPU label.
func (p *Provider) GetNodeGpuConfig(_ context.Context, node *apiv1.Node) *cloudprovider.GpuConfig {
	return cloudprovider.LabelledGPUConfig(p.GPULabel(), node)
}

// Pricing implements cloudprovider.CloudProvider; a server without pricing
// answers ErrNotImplemented on the first price asked.
func (p *Provider) Pricing(context.Context) (cloudprovider.PricingModel, error) {
	return pricing{p: p}, nil
}
