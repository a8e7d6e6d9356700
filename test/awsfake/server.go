package awsfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Fake credentials Env hands to a child process; the fake accepts any.
const (
	fakeAccessKeyID     = "AKIAAWSFAKE000000000"
	fakeSecretAccessKey = "awsfake/secret/not/a/real/key/000000000"
)

// Option configures a Server.
type Option func(*Server)

// WithRegion sets the region the server answers for (default "us-east-1");
// requests signed for another region are refused.
func WithRegion(r string) Option { return func(s *Server) { s.region = r } }

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	region string
	now    func() time.Time

	mu            sync.Mutex
	instanceTypes map[string]InstanceType
	subnets       map[string]string // subnet ID -> zone
	templates     map[string]*LaunchTemplate
	launchConfigs map[string]LaunchConfiguration
	groups        map[string]*groupState
	instances     []*Instance // every instance ever launched, in launch order
	byID          map[string]*Instance
	activities    []*activity          // in start order
	desiredLog    []DesiredChange      // SetDesiredCapacity calls that changed a group (history.go)
	inFlight      map[string]*activity // instance ID -> its in-progress launch or termination
	calls         map[string]int
	retries       map[string]int // calls the SDK marked as a retry (amz-sdk-request attempt > 1)
	terminated    []string
	throttle      int // percent
	throttleAcc   int
	throttled     int
	startDelay    time.Duration
	beforeCall    map[string][]func() // action -> hooks (BeforeCall)
	deny          map[string]bool     // actions answered with AccessDenied (Deny)
	images        map[string]string   // AMI ID -> architecture (AddImage)

	// nodegroups are the EKS managed node groups by "<cluster>/<name>" (eks.go).
	nodegroups map[string]EKSNodegroup
	// products are the Price List's products by SKU (pricing.go);
	// spotPrices the Spot price changes (spotprice.go).
	products   map[string]pricingProduct
	spotPrices []SpotPrice
	// sqs holds the SQS queues and their messages (sqs.go).
	sqs sqsState
	// reservations are the Capacity Reservations and Blocks by ID
	// (reservations.go).
	reservations map[string]*CapacityReservation

	listener net.Listener
	httpSrv  *http.Server
	stop     context.CancelFunc
	done     chan struct{}
}

// groupState is a group with what the fake tracks about it.
type groupState struct {
	Group
	created  time.Time
	members  []*Instance // not terminated, in launch order
	nextZone int
	failure  *launchFailure
	lastFail time.Time
}

// New returns a server that is not listening yet.
func New(opts ...Option) *Server {
	s := &Server{
		region:        "us-east-1",
		now:           time.Now,
		instanceTypes: map[string]InstanceType{},
		subnets:       map[string]string{},
		templates:     map[string]*LaunchTemplate{},
		launchConfigs: map[string]LaunchConfiguration{},
		groups:        map[string]*groupState{},
		byID:          map[string]*Instance{},
		inFlight:      map[string]*activity{},
		calls:         map[string]int{},
		retries:       map[string]int{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Start listens on 127.0.0.1 at a free port and serves until Close. It also
// runs the background reconciler that launches instances and moves them
// through their lifecycle.
func (s *Server) Start() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("awsfake: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.listener, s.stop, s.done = l, cancel, make(chan struct{})
	s.httpSrv = &http.Server{Handler: http.HandlerFunc(s.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := s.httpSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "awsfake: serving")
		}
	}()
	go s.reconcileLoop(ctx)
	return nil
}

// reconcileLoop moves instances along without waiting for a call.
func (s *Server) reconcileLoop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.mu.Lock()
			s.reconcileLocked()
			s.mu.Unlock()
		}
	}
}

// URL is the server's base URL, the value for AWS_ENDPOINT_URL_AUTO_SCALING,
// AWS_ENDPOINT_URL_EC2 and AWS_ENDPOINT_URL_EKS.
func (s *Server) URL() string {
	if s.listener == nil {
		return ""
	}
	return "http://" + s.listener.Addr().String()
}

// Close stops the server.
func (s *Server) Close() {
	if s.httpSrv == nil {
		return
	}
	_ = s.httpSrv.Close()
	s.stop()
	<-s.done
}

// Env is the environment a child process needs to use the fake through the
// AWS SDK: endpoints, region, fake static credentials, no instance metadata,
// no shared config files, and generous retries.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_AUTO_SCALING=" + s.URL(),
		"AWS_ENDPOINT_URL_EC2=" + s.URL(),
		"AWS_ENDPOINT_URL_EKS=" + s.URL(),
		"AWS_ENDPOINT_URL_PRICING=" + s.URL(),
		"AWS_ENDPOINT_URL_SQS=" + s.URL(),
		"AWS_REGION=" + s.region,
		"AWS_ACCESS_KEY_ID=" + fakeAccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + fakeSecretAccessKey,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_MAX_ATTEMPTS=10",
	}
}

// AddInstanceType registers (or replaces) an instance type.
func (s *Server) AddInstanceType(t InstanceType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.instanceTypes[t.Name] = t
}

// AddSubnet registers a subnet in a zone.
func (s *Server) AddSubnet(id, zone string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subnets[id] = zone
}

// AddLaunchTemplate registers a launch template and returns its ID.
func (s *Server) AddLaunchTemplate(lt LaunchTemplate) (id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lt.ID == "" {
		lt.ID = "lt-" + randomHex(17)
	}
	lt.Versions = append([]LaunchTemplateVersion(nil), lt.Versions...)
	s.templates[lt.ID] = &lt
	s.retryFailedLaunchesLocked()
	return lt.ID
}

// AddLaunchConfiguration registers a launch configuration.
func (s *Server) AddLaunchConfiguration(lc LaunchConfiguration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launchConfigs[lc.Name] = lc
	s.retryFailedLaunchesLocked()
}

// retryFailedLaunchesLocked lets groups whose launches failed try again at
// once (a launch template or configuration they lacked may now exist).
func (s *Server) retryFailedLaunchesLocked() {
	for _, g := range s.groups {
		g.lastFail = time.Time{}
	}
	s.reconcileLocked()
}

// AddGroup registers an Auto Scaling group, or replaces the settings of an
// existing one (keeping its instances); the fake launches instances towards
// its Desired at once.
func (s *Server) AddGroup(g Group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g = copyGroup(g)
	if old, ok := s.groups[g.Name]; ok {
		old.Group = g
	} else {
		s.groups[g.Name] = &groupState{Group: g, created: s.now()}
	}
	s.reconcileLocked()
}

// copyGroup copies a group's reference fields.
func copyGroup(g Group) Group {
	if g.LaunchTemplate != nil {
		lt := *g.LaunchTemplate
		g.LaunchTemplate = &lt
	}
	if g.MixedInstances != nil {
		mi := *g.MixedInstances
		mi.Overrides = append([]string(nil), mi.Overrides...)
		if p := mi.OnDemandPercentageAboveBaseCapacity; p != nil {
			pct := *p
			mi.OnDemandPercentageAboveBaseCapacity = &pct
		}
		if mi.Requirements != nil {
			r := *mi.Requirements
			mi.Requirements = &r
		}
		g.MixedInstances = &mi
	}
	g.Subnets = append([]string(nil), g.Subnets...)
	tags := make(map[string]string, len(g.Tags))
	for k, v := range g.Tags {
		tags[k] = v
	}
	g.Tags = tags
	return g
}

// Instances returns the group's instances that are not terminated, in launch
// order.
func (s *Server) Instances(group string) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	g, ok := s.groups[group]
	if !ok {
		return nil
	}
	var out []Instance
	for _, in := range g.members {
		if in.Lifecycle != LifecycleTerminated {
			out = append(out, *in)
		}
	}
	return out
}

// AllInstances returns every instance that is not terminated, of every group,
// in launch order.
func (s *Server) AllInstances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconcileLocked()
	var out []Instance
	for _, in := range s.instances {
		if in.Lifecycle != LifecycleTerminated {
			out = append(out, *in)
		}
	}
	return out
}

// Instance returns the instance with that ID whatever its lifecycle state
// (terminated ones included: the fake keeps every instance it launched), so
// a test can learn the group of an instance that came and went between two
// of its polls.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.instances {
		if in.ID == id {
			return *in, true
		}
	}
	return Instance{}, false
}

// GroupState returns the group's current settings (min, max, desired); the
// zero Group when there is no such group.
func (s *Server) GroupState(name string) Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	if !ok {
		return Group{}
	}
	return copyGroup(g.Group)
}

// Calls returns how many requests each action received (throttled ones
// included; requests refused for their signature not).
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// Retries returns, per action, how many of the calls the client marked as
// a retry of an earlier attempt (the SDK's amz-sdk-request header): a
// call count that must be exact can leave them out.
func (s *Server) Retries() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.retries))
	for k, v := range s.retries {
		out[k] = v
	}
	return out
}

// Throttled returns how many requests were answered with a throttling error.
func (s *Server) Throttled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.throttled
}

// Terminated returns the IDs of the instances terminated through
// TerminateInstanceInAutoScalingGroup, in call order (not those a group
// terminated on its own after its desired capacity was lowered).
func (s *Server) Terminated() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.terminated...)
}

// SetThrottle makes that share of calls (0-100, spread evenly) answer with a
// throttling error: 400 Throttling for Auto Scaling, 503
// RequestLimitExceeded for EC2.
func (s *Server) SetThrottle(percent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttle = max(0, min(100, percent))
	s.throttleAcc = 0
}

// SetStartDelay sets how long a new instance stays Pending (and a terminated
// one Terminating) before moving on; 0 (the default) moves it at once.
func (s *Server) SetStartDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startDelay = d
}

// sortedGroupNames returns the group names in order.
func (s *Server) sortedGroupNames() []string {
	names := make([]string, 0, len(s.groups))
	for n := range s.groups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// randomHex returns n random lower-case hex digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
