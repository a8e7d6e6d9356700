package framework

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	schedscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	schedframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// initSchedulerMetrics creates the scheduler's metric objects, which the
// framework dereferences, without registering them anywhere. The scheduler
// keeps them in package variables, so this is the one piece of global state
// this module touches; it is done once.
var initSchedulerMetrics = sync.OnceFunc(schedmetrics.InitMetrics)

// Handle runs the scheduler's PreFilter and Filter plugins against a Snapshot.
type Handle struct {
	fw       schedframework.Framework
	snapshot *Snapshot
	policy   profilePolicy
	logs     verbosityCap
	dra      *draPlugin // nil when the profile disables DynamicResources
	logger   klog.Logger
	// namespaces tells which namespaces may hold admin-access claims
	// (checkAdminAccess); nil without an informer factory.
	namespaces corelisters.NamespaceLister
}

// Option configures a Handle.
type Option func(*options)

type options struct {
	configFile  string
	parallelism int
	client      kubernetes.Interface
	verbosity   int
	dra         DRASource
}

// WithDRA feeds the snapshot the cluster's DRA objects (resource.k8s.io/v1)
// at each Reset. Without it pods with claims made from templates fit
// nowhere, and pods with other claims fit only if the snapshot holds them.
func WithDRA(src DRASource) Option { return func(o *options) { o.dra = src } }

// WithSchedulerConfigFile uses the first profile of a KubeSchedulerConfiguration
// file (--scheduler-config-file) instead of the default profile.
func WithSchedulerConfigFile(path string) Option { return func(o *options) { o.configFile = path } }

// WithParallelism sets how many nodes Filter checks at once (--predicate-parallelism).
func WithParallelism(n int) Option { return func(o *options) { o.parallelism = n } }

// WithVerbosity caps the verbosity of the scheduler framework's and its
// plugins' logs (--scheduler-verbosity; default 0: their V(1) and above are
// not written, whatever -v says).
func WithVerbosity(v int) Option { return func(o *options) { o.verbosity = v } }

// WithClient lets plugins that want a client have one; they never write
// through it during simulation.
func WithClient(c kubernetes.Interface) Option { return func(o *options) { o.client = c } }

// New builds the scheduler framework over snapshot. informerFactory feeds the
// plugins' listers: the plugins register at construction the informers they
// read (PVs, PVCs, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities,
// VolumeAttachments, Namespaces, ...), and New adds the CSINodes one of the
// shared CSI manager, so start the factory after New and wait for its caches.
// The snapshot feeds the rest: nodes and their pods, which claims pods use
// (ReadWriteOncePod), and the CSINodes of simulated nodes.
func New(ctx context.Context, snapshot *Snapshot, informerFactory informers.SharedInformerFactory, opts ...Option) (*Handle, error) {
	o := &options{parallelism: 4}
	for _, f := range opts {
		f(o)
	}
	initSchedulerMetrics()
	profile, err := loadProfile(o.configFile)
	if err != nil {
		return nil, err
	}
	csi := &csiManager{snap: snapshot}
	if informerFactory != nil {
		csi.lister = informerFactory.Storage().V1().CSINodes().Lister()
	}
	if o.dra != nil {
		snapshot.SetDRASource(o.dra)
		if err := snapshot.dra.load(); err != nil {
			return nil, err
		}
	}
	fwOpts := []frameworkruntime.Option{
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithSharedCSIManager(csi),
		frameworkruntime.WithSharedDRAManager(draManager{snap: snapshot}),
		frameworkruntime.WithParallelism(o.parallelism),
		frameworkruntime.WithLogger(verbosityCap{max: o.verbosity}.logger(klog.FromContext(ctx))),
	}
	if o.client != nil {
		fwOpts = append(fwOpts, frameworkruntime.WithClientSet(o.client))
	}
	registry, captured := withCapturedDRAPlugin(plugins.NewInTreeRegistry())
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile, fwOpts...)
	if err != nil {
		return nil, fmt.Errorf("building the scheduler framework: %w", err)
	}
	h := &Handle{fw: fw, snapshot: snapshot, policy: newProfilePolicy(fw.ListPlugins(), profile),
		logs: verbosityCap{max: o.verbosity}, logger: klog.FromContext(ctx)}
	if informerFactory != nil {
		h.namespaces = informerFactory.Core().V1().Namespaces().Lister()
	}
	if *captured != nil && pluginEnabled(fw.ListPlugins(), dynamicResourcesPlugin) {
		h.dra = newDRAPlugin(*captured)
		snapshot.dra.bind = h.bindClaims
	}
	return h, nil
}

func loadProfile(path string) (*schedconfig.KubeSchedulerProfile, error) {
	var cfg *schedconfig.KubeSchedulerConfiguration
	if path == "" {
		def, err := latest.Default()
		if err != nil {
			return nil, fmt.Errorf("building the default scheduler configuration: %w", err)
		}
		cfg = def
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--scheduler-config-file: %w", err)
		}
		obj, gvk, err := schedscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("--scheduler-config-file %s: %w", path, err)
		}
		c, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
		if !ok {
			return nil, fmt.Errorf("--scheduler-config-file %s: not a KubeSchedulerConfiguration but %T", path, obj)
		}
		// What kube-scheduler (and upstream's autoscaler) refuses is refused
		// here too. The checks per plugin depend on the file's version,
		// which decoding into the internal type drops.
		c.APIVersion = gvk.GroupVersion().String()
		if err := schedvalidation.ValidateKubeSchedulerConfiguration(c); err != nil {
			return nil, fmt.Errorf("--scheduler-config-file %s: %w", path, err)
		}
		cfg = c
	}
	if len(cfg.Profiles) == 0 {
		return nil, fmt.Errorf("scheduler configuration has no profile")
	}
	profile := &cfg.Profiles[0]
	return profile, nil
}

// Snapshot returns the snapshot the handle simulates on.
func (h *Handle) Snapshot() *Snapshot { return h.snapshot }

// PodCheck is the scheduler's PreFilter result for one pod; reuse it to ask
// about several nodes while the snapshot does not change.
type PodCheck struct {
	h       *Handle
	pod     *apiv1.Pod
	state   fwk.CycleState
	allowed map[string]bool // nil: every node may be considered
	err     error
}

// Prepare runs PreFilter for pod on the current snapshot.
func (h *Handle) Prepare(ctx context.Context, pod *apiv1.Pod) *PodCheck {
	if len(pod.Spec.ResourceClaims) > 0 {
		resolved, err := h.claimedPod(pod)
		if err != nil {
			return &PodCheck{h: h, pod: pod, err: &Unschedulable{Pod: pod, Plugin: dynamicResourcesPlugin,
				Reasons: []string{err.Error()}}}
		}
		pod = resolved
	}
	state := schedframework.NewCycleState()
	res, status, _ := h.fw.RunPreFilterPlugins(h.logs.wrap(ctx), state, pod)
	c := &PodCheck{h: h, pod: pod, state: state}
	if !status.IsSuccess() && !status.IsSkip() {
		c.err = &Unschedulable{Pod: pod, Reasons: status.Reasons(), Plugin: status.Plugin()}
		return c
	}
	if res != nil && !res.AllNodes() {
		c.allowed = make(map[string]bool, len(res.NodeNames))
		for n := range res.NodeNames {
			c.allowed[n] = true
		}
	}
	return c
}

// Err is the PreFilter failure, if any: the pod fits no node.
func (c *PodCheck) Err() error { return c.err }

// Fits runs Filter on one node; nil means the pod fits there.
func (c *PodCheck) Fits(ctx context.Context, nodeName string) error {
	ni, err := c.h.snapshot.NodeInfo(nodeName)
	if err != nil && c.err == nil {
		return err
	}
	status, ran := c.filter(ctx, ni)
	return c.verdict(nodeName, status, ran)
}

// filter runs the Filter plugins on ni; ran is false when the check failed
// at PreFilter or PreFilter excluded the node (verdict tells them apart).
// A nil status is a success, as the framework has it.
func (c *PodCheck) filter(ctx context.Context, ni *schedframework.NodeInfo) (status *fwk.Status, ran bool) {
	if c.err != nil || (c.allowed != nil && !c.allowed[ni.Node().Name]) {
		return nil, false
	}
	return c.h.fw.RunFilterPlugins(c.h.logs.wrap(ctx), c.state, c.pod, ni), true
}

// verdict turns filter's answer for nodeName into Fits' error. It is kept
// apart from filter so that a walk over many nodes builds the error of
// the last refusal only.
func (c *PodCheck) verdict(nodeName string, status *fwk.Status, ran bool) error {
	switch {
	case c.err != nil:
		return c.err
	case !ran:
		return &Unschedulable{Pod: c.pod, Node: nodeName, Reasons: []string{"excluded by PreFilter"}}
	case !status.IsSuccess():
		return &Unschedulable{Pod: c.pod, Node: nodeName, Reasons: status.Reasons(), Plugin: status.Plugin()}
	}
	return nil
}

// FitCount counts how many of pods, offered one after another, node nodeName
// accepts: each must pass the Filter plugins (asked about the pod the check
// was prepared for) on the node as the previous ones left it. It stops at the
// first refusal and returns its reason; the reason is nil when every pod
// fits. The pods must be equivalent to the prepared pod, and shape must be
// theirs. When room is not nil, each pod must first pass the HasRoom
// pre-check for room. The pods are placed on a private copy of the node: the
// snapshot does not change.
func (c *PodCheck) FitCount(ctx context.Context, shape *PodShape, pods []*apiv1.Pod, nodeName string, room *Request) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.allowed != nil && !c.allowed[nodeName] {
		return 0, &Unschedulable{Pod: c.pod, Node: nodeName, Reasons: []string{"excluded by PreFilter"}}
	}
	if len(c.pod.Spec.ResourceClaims) > 0 {
		c.h.snapshot.Fork()
		defer c.h.snapshot.Revert()
		return c.placeClaimed(ctx, shape, pods, nodeName, room)
	}
	ni, err := c.h.snapshot.NodeInfo(nodeName)
	if err != nil {
		return 0, err
	}
	ctx = c.h.logs.wrap(ctx)
	trial := ni // copied before the first pod is added
	for i, p := range pods {
		if room != nil && !hasRoom(trial, *room) {
			return i, &Unschedulable{Pod: c.pod, Node: nodeName, Reasons: []string{"not enough cpu, memory or pod slots left"}}
		}
		if status := c.h.fw.RunFilterPlugins(ctx, c.state, c.pod, trial); !status.IsSuccess() {
			return i, &Unschedulable{Pod: c.pod, Node: nodeName, Reasons: status.Reasons(), Plugin: status.Plugin()}
		}
		if i == len(pods)-1 {
			break
		}
		if trial == ni {
			trial = ni.SnapshotConcrete()
		}
		trial.AddPodInfo(shape.bind(p, nodeName))
	}
	return len(pods), nil
}

// CheckPod reports whether pod fits node: PreFilter then Filter.
func (h *Handle) CheckPod(ctx context.Context, pod *apiv1.Pod, nodeName string) error {
	return h.Prepare(ctx, pod).Fits(ctx, nodeName)
}

// FitAnywhere returns the first node, in snapshot order from start, where pod
// fits and that accept does not reject (accept may be nil).
func (h *Handle) FitAnywhere(ctx context.Context, pod *apiv1.Pod, accept func(node string) bool) (string, error) {
	start := 0
	return h.FitFrom(ctx, pod, accept, &start)
}

// FitFrom is FitAnywhere starting at the node at index *next of the
// snapshot's list and wrapping around; it leaves *next at the node that took
// the pod. A caller placing many pods one after the other (the pods of the
// nodes a scale-down simulation removes) thus asks the plugins about the
// nodes earlier pods filled once, not once per pod: from the list's start,
// the pods of the k-th node removed would be refused by all the nodes the
// k-1 before them filled. *next is a hint: any value is valid.
func (h *Handle) FitFrom(ctx context.Context, pod *apiv1.Pod, accept func(node string) bool, next *int) (string, error) {
	return h.Prepare(ctx, pod).FitFrom(ctx, accept, next)
}

// FitFrom is Handle.FitFrom for the pod c was prepared for (or lent to: see
// CheckMemo), on the snapshot as it is now.
func (c *PodCheck) FitFrom(ctx context.Context, accept func(node string) bool, next *int) (string, error) {
	return c.FitFromWalk(ctx, accept, next, nil)
}

// Walk records what placement searches read and decided: Read, the name of
// every node whose Filter plugins ran, in order (the nodes whose content an
// answer depends on; the nodes accept rejects are not read), and Dest, the
// node each placed pod went to, in order. Wide is set when a searched pod's
// plugins may also read other nodes than those (Handle.ReadsOtherNodes):
// then Read does not bound what the answers depend on.
type Walk struct {
	Read, Dest []string
	Wide       bool
}

// FitFromWalk is FitFrom that also records its search in w (when not nil).
func (c *PodCheck) FitFromWalk(ctx context.Context, accept func(node string) bool, next *int, w *Walk) (string, error) {
	if w != nil && !w.Wide && c.h.ReadsOtherNodes(c.pod) {
		w.Wide = true
	}
	if c.err != nil {
		return "", c.err
	}
	// The snapshot's own list, walked in place (Filter plugins do not change
	// the snapshot); the error is built for the last refusal only.
	list := c.h.snapshot.list
	start := 0
	if n := len(list); n > 0 {
		start = ((*next % n) + n) % n
	}
	var lastNode string
	var lastStatus *fwk.Status
	var lastRan bool
	for k := range list {
		i := (start + k) % len(list)
		ni := list[i].(*schedframework.NodeInfo)
		name := ni.Node().Name
		if accept != nil && !accept(name) {
			continue
		}
		status, ran := c.filter(ctx, ni)
		if w != nil {
			w.Read = append(w.Read, name)
		}
		if ran && status.IsSuccess() {
			*next = i
			if w != nil {
				w.Dest = append(w.Dest, name)
			}
			return name, nil
		}
		lastNode, lastStatus, lastRan = name, status, ran
	}
	if lastNode == "" {
		return "", &Unschedulable{Pod: c.pod, Reasons: []string{"no node to consider"}}
	}
	return "", c.verdict(lastNode, lastStatus, lastRan)
}

// Unschedulable says why a pod does not fit.
type Unschedulable struct {
	Pod     *apiv1.Pod
	Node    string // empty when PreFilter rejected the pod for every node
	Plugin  string
	Reasons []string
}

func (u *Unschedulable) Error() string {
	where := "any node"
	if u.Node != "" {
		where = "node " + u.Node
	}
	return fmt.Sprintf("pod %s/%s does not fit %s: %s", u.Pod.Namespace, u.Pod.Name, where, strings.Join(u.Reasons, "; "))
}
