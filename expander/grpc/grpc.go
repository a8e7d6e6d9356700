package grpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/expander/grpc/protos"
)

// Fallback reasons, the reason label of the fallback metric.
const (
	ReasonError        = "error"
	ReasonTimeout      = "timeout"
	ReasonEmpty        = "empty"
	ReasonUnknownGroup = "unknown-node-group"
	ReasonEncoding     = "encoding"
)

// Options are the client's settings, from the flags.
type Options struct {
	// URL is --grpc-expander-url: host:port, or a grpc target URL.
	URL string
	// CertFile is --grpc-expander-cert: the CA (or server) certificate the
	// server's is checked against. Empty means plaintext (tests only: the
	// flags refuse it).
	CertFile string
	// Timeout bounds one call (--grpc-expander-timeout).
	Timeout time.Duration
}

// Metrics counts the fallbacks; metrics.Metrics implements it.
type Metrics interface {
	ExpanderFallback(expander, reason string)
}

// Expander is the grpc expander filter.
type Expander struct {
	conn     *grpclib.ClientConn
	client   protos.ExpanderClient
	timeout  time.Duration
	fallback expander.Filter
	metrics  Metrics
	clock    clock.PassiveClock

	mu         sync.Mutex
	lastReason string
	lastLog    time.Time
}

// Option configures an Expander.
type Option func(*Expander)

// WithClock replaces the real clock that spaces the fallback log lines.
func WithClock(c clock.PassiveClock) Option { return func(e *Expander) { e.clock = c } }

// New connects (lazily: a server that is down at start-up is not an error;
// calls fail and fall back until it is up). fallback decides when the
// server cannot; nil passes every option on to the rest of the chain.
func New(opts Options, fallback expander.Filter, m Metrics, options ...Option) (*Expander, error) {
	if opts.URL == "" {
		return nil, errors.New("--grpc-expander-url is empty")
	}
	if opts.Timeout <= 0 {
		return nil, fmt.Errorf("--grpc-expander-timeout must be positive, got %v", opts.Timeout)
	}
	creds := insecure.NewCredentials()
	if opts.CertFile != "" {
		c, err := credentials.NewClientTLSFromFile(opts.CertFile, serverName(opts.URL))
		if err != nil {
			return nil, fmt.Errorf("--grpc-expander-cert %q: %w", opts.CertFile, err)
		}
		creds = c
	}
	conn, err := grpclib.NewClient(opts.URL, grpclib.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("--grpc-expander-url %q: %w", opts.URL, err)
	}
	e := &Expander{conn: conn, client: protos.NewExpanderClient(conn), timeout: opts.Timeout, fallback: fallback,
		metrics: m, clock: clock.RealClock{}}
	for _, o := range options {
		o(e)
	}
	return e, nil
}

// Close closes the connection.
func (e *Expander) Close() error { return e.conn.Close() }

// serverName is the name the server's certificate must carry: the URL's
// host, as upstream takes it.
func serverName(target string) string {
	host := target
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		host = u.Host
	} else if i := strings.LastIndex(target, "///"); i >= 0 {
		host = target[i+3:]
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// BestOptions implements expander.Filter.
func (e *Expander) BestOptions(ctx context.Context, options []expander.Option,
	nodeInfos map[string]*cloudprovider.NodeInfo) []expander.Option {
	if len(options) == 0 {
		return nil
	}
	req, err := request(options, nodeInfos)
	if err != nil {
		return e.fall(ctx, ReasonEncoding, err, options, nodeInfos)
	}
	callCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	resp, err := e.client.BestOptions(callCtx, req)
	if err != nil {
		reason := ReasonError
		if status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
			reason = ReasonTimeout
		}
		return e.fall(ctx, reason, err, options, nodeInfos)
	}
	best, reason, err := pick(options, resp)
	if err != nil {
		return e.fall(ctx, reason, err, options, nodeInfos)
	}
	return best
}

// request encodes the options and their groups' templates as the protocol
// carries them: Kubernetes objects in their protobuf encoding.
func request(options []expander.Option, nodeInfos map[string]*cloudprovider.NodeInfo) (*protos.BestOptionsRequest, error) {
	req := &protos.BestOptionsRequest{NodeBytesMap: map[string][]byte{}}
	for _, o := range options {
		id := o.NodeGroup.Id()
		opt := &protos.Option{NodeGroupId: id, NodeCount: int32(o.NodeCount), Debug: o.Debug}
		for _, p := range o.Pods {
			b, err := p.Marshal()
			if err != nil {
				return nil, fmt.Errorf("encoding pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			opt.PodBytes = append(opt.PodBytes, b)
		}
		req.Options = append(req.Options, opt)
		if info := nodeInfos[id]; info != nil && info.Node != nil {
			if _, done := req.NodeBytesMap[id]; !done {
				b, err := info.Node.Marshal()
				if err != nil {
					return nil, fmt.Errorf("encoding the template node of %s: %w", id, err)
				}
				req.NodeBytesMap[id] = b
			}
		}
	}
	return req, nil
}

// pick maps the server's answer back to the options sent. The server names
// options by node group id; what it says of counts or pods is not taken
// (the decision made them). An empty answer or one naming a group that was
// not sent is a bad answer: the caller falls back.
func pick(options []expander.Option, resp *protos.BestOptionsResponse) ([]expander.Option, string, error) {
	if len(resp.GetOptions()) == 0 {
		return nil, ReasonEmpty, errors.New("the server chose no option")
	}
	byID := make(map[string]int, len(options))
	for i, o := range options {
		byID[o.NodeGroup.Id()] = i
	}
	seen := map[string]bool{}
	var out []expander.Option
	for _, o := range resp.GetOptions() {
		id := o.GetNodeGroupId()
		i, ok := byID[id]
		if !ok {
			return nil, ReasonUnknownGroup, fmt.Errorf("the server chose node group %q, which was not among the options", id)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, options[i])
	}
	return out, "", nil
}

// fall counts and logs a fallback and returns what the fallback decides.
func (e *Expander) fall(ctx context.Context, reason string, err error, options []expander.Option,
	nodeInfos map[string]*cloudprovider.NodeInfo) []expander.Option {
	if e.metrics != nil {
		e.metrics.ExpanderFallback("grpc", reason)
	}
	e.mu.Lock()
	now := e.clock.Now()
	// One line per reason and scan interval or so: a loop can ask many
	// times, a down server would fill the log.
	logIt := reason != e.lastReason || now.Sub(e.lastLog) >= 10*time.Second
	if logIt {
		e.lastReason, e.lastLog = reason, now
	}
	e.mu.Unlock()
	to := "the rest of the expander chain"
	if e.fallback != nil {
		to = "the fallback expander"
	}
	if logIt {
		klog.FromContext(ctx).Error(err, "The grpc expander could not choose; falling back", "reason", reason, "to", to,
			"options", len(options))
	}
	if e.fallback != nil {
		return e.fallback.BestOptions(ctx, options, nodeInfos)
	}
	return options
}
