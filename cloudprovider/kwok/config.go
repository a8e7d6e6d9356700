package kwok

import (
	"errors"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Config is the provider's configuration, read from --cloud-config or the
// ConfigMap kwok-provider-config (key "config") in --namespace.
type Config struct {
	NodeGroups []NodeGroupConfig `json:"nodeGroups"`
	// CreateQPS bounds Node creations and deletions per second (default 200).
	CreateQPS float64 `json:"createQPS,omitempty"`
	// Workers is the number of concurrent Node writers (default 16).
	Workers int `json:"workers,omitempty"`
	// GPULabel is the node label that names a node's GPU type (default
	// kwok.x-k8s.io/gpu); AvailableGPUTypes lists the types there are.
	GPULabel          string   `json:"gpuLabel,omitempty"`
	AvailableGPUTypes []string `json:"availableGPUTypes,omitempty"`
}

// NodeGroupConfig is one simulated node group.
type NodeGroupConfig struct {
	Name    string `json:"name"`
	MinSize int    `json:"minSize"`
	MaxSize int    `json:"maxSize"`
	// InitialSize is the size a group with no instance at all is given when
	// the provider starts (upstream's desired-count).
	InitialSize  int            `json:"initialSize,omitempty"`
	PricePerHour float64        `json:"pricePerHour,omitempty"`
	Template     TemplateConfig `json:"template"`
	Faults       FaultConfig    `json:"faults,omitempty"`
	// Options override the autoscaler's per-node-group defaults.
	Options *OptionsConfig `json:"options,omitempty"`
}

// TemplateConfig describes the nodes of a group.
type TemplateConfig struct {
	Labels      map[string]string  `json:"labels,omitempty"`
	Annotations map[string]string  `json:"annotations,omitempty"`
	Taints      []apiv1.Taint      `json:"taints,omitempty"`
	Capacity    apiv1.ResourceList `json:"capacity"`
	// Allocatable defaults to Capacity.
	Allocatable apiv1.ResourceList `json:"allocatable,omitempty"`
	// FromNodes makes TemplateNodeInfo report ErrNotImplemented, as cloud
	// providers without templates do: the autoscaler then builds the group's
	// template from one of its nodes. The fields above still shape the
	// nodes the group creates.
	FromNodes bool `json:"fromNodes,omitempty"`
	// Devices are the DRA devices each node of the group offers: the
	// provider publishes them as ResourceSlices once the Node is created
	// (deleted with it), and the template carries them, so that pods with
	// resource claims scale the group up from zero.
	Devices []DriverDevices `json:"devices,omitempty"`
}

// FaultConfig injects the failures real clouds have.
type FaultConfig struct {
	// RegistrationDelay is how long after creation an instance's Node appears.
	RegistrationDelay Duration `json:"registrationDelay,omitempty"`
	// ResourceSliceDelay is how long after its Node appears a node's
	// ResourceSlices (template.devices) are published, as DRA drivers that
	// take time to start: meanwhile the node is Ready without its devices.
	ResourceSliceDelay Duration `json:"resourceSliceDelay,omitempty"`
	// CreationFailureRate is the share (0..1) of new instances that fail to
	// be created (error class Other, code CREATION_FAILED).
	CreationFailureRate float64 `json:"creationFailureRate,omitempty"`
	// OutOfCapacityAfter, when positive, makes every instance beyond that
	// many live instances of the group fail with an OutOfResources error
	// (code STOCKOUT), as a zone out of capacity does.
	OutOfCapacityAfter int `json:"outOfCapacityAfter,omitempty"`
	// ForeignProviderID registers the group's Nodes under a provider ID
	// that does not match their instances ("othercloud://<name>"), as a
	// misconfigured cloud controller would: every instance then looks
	// unregistered to the autoscaler.
	ForeignProviderID bool `json:"foreignProviderID,omitempty"`
	// NodeProviderIDSpelling writes the provider ID of the group's Nodes
	// another way than their instances' ids, as clouds and their controllers
	// do: "" (kwok://<name>, as listed), "emptyHost" (kwok:///<name>) or
	// "upperScheme" (KWOK://<name>). The instance is still the Node's.
	NodeProviderIDSpelling string `json:"nodeProviderIDSpelling,omitempty"`
	// DeletionDelay keeps a deleted instance listed, as being deleted, and
	// its Node in place for this long, as a VM takes time to terminate.
	DeletionDelay Duration `json:"deletionDelay,omitempty"`
	// NeverRegisterRate is the share (0..1) of new instances that are created
	// but whose Node never appears.
	NeverRegisterRate float64 `json:"neverRegisterRate,omitempty"`
	// ListingDelay hides a new instance from Nodes (the group's target size
	// counts it) for this long after its creation, as most clouds list a new
	// instance only some time after the increase.
	ListingDelay Duration `json:"listingDelay,omitempty"`
	// PartialFailureRate is the share (0..1) of increases, all-or-nothing
	// ones included, of which some instances fail: of an increase of n,
	// between 1 and n-1 instances (the one of an increase of 1), picked at
	// random, fail with error class Other, code CREATION_FAILED, when
	// their Node would have appeared; the others register as usual. An
	// all-or-nothing cloud API promises that every instance is accepted,
	// not that every one boots.
	PartialFailureRate float64 `json:"partialFailureRate,omitempty"`
	// APIErrorRate is the share (0..1) of the group's provider calls
	// (TargetSize, Nodes, IncreaseSize, AtomicIncreaseSize, DeleteNodes,
	// ForceDeleteNodes, DecreaseTargetSize) that fail having changed
	// nothing, with an error wrapping cloudprovider.ErrTransient, as a
	// throttled or briefly unavailable cloud API does.
	APIErrorRate float64 `json:"apiErrorRate,omitempty"`
	// LostResponseRate is the share (0..1) of the group's size changes
	// (increases, deletions, target decreases) that take effect but answer
	// with an error wrapping context.DeadlineExceeded, as a call that timed
	// out after the cloud had received it.
	LostResponseRate float64 `json:"lostResponseRate,omitempty"`
}

// OptionsConfig are per-group overrides of the autoscaler's defaults; unset
// fields keep the default.
type OptionsConfig struct {
	ScaleDownUtilizationThreshold *float64  `json:"scaleDownUtilizationThreshold,omitempty"`
	ScaleDownUnneededTime         *Duration `json:"scaleDownUnneededTime,omitempty"`
	ScaleDownUnreadyTime          *Duration `json:"scaleDownUnreadyTime,omitempty"`
	MaxNodeProvisionTime          *Duration `json:"maxNodeProvisionTime,omitempty"`
	ZeroOrMaxNodeScaling          *bool     `json:"zeroOrMaxNodeScaling,omitempty"`
	// MaxNodeLifetime replaces the group's nodes older than this (the
	// disruption engine's expiry; "0s": never), in place of
	// --max-node-lifetime.
	MaxNodeLifetime *Duration `json:"maxNodeLifetime,omitempty"`
	// DisruptionBudget is the group's own disruption budget, in
	// --disruption-budget's syntax (several separated by '|'); the engine
	// checks it and ignores, with a log line, one that does not parse.
	DisruptionBudget *string `json:"disruptionBudget,omitempty"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("durations are strings such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// ParseConfig reads and validates a YAML config.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parsing the kwok provider config: %w", err)
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.CreateQPS == 0 {
		c.CreateQPS = 200
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	for i := range c.NodeGroups {
		t := &c.NodeGroups[i].Template
		if t.Allocatable == nil {
			t.Allocatable = t.Capacity.DeepCopy()
		}
	}
}

// Validate reports every problem of the config.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.CreateQPS < 0 {
		add("createQPS must not be negative")
	}
	if c.Workers < 0 {
		add("workers must not be negative")
	}
	seen := map[string]bool{}
	for i, g := range c.NodeGroups {
		where := fmt.Sprintf("nodeGroups[%d] (%s)", i, g.Name)
		if msgs := validation.IsDNS1123Label(g.Name); len(msgs) > 0 {
			add("%s: name: %v", where, msgs)
		}
		if seen[g.Name] {
			add("%s: name appears twice", where)
		}
		seen[g.Name] = true
		if g.MinSize < 0 || g.MaxSize < g.MinSize {
			add("%s: want 0 <= minSize <= maxSize, got %d and %d", where, g.MinSize, g.MaxSize)
		}
		if g.InitialSize < 0 || g.InitialSize > g.MaxSize {
			add("%s: want 0 <= initialSize <= maxSize, got %d", where, g.InitialSize)
		}
		if g.PricePerHour < 0 {
			add("%s: pricePerHour must not be negative", where)
		}
		for _, r := range []apiv1.ResourceName{apiv1.ResourceCPU, apiv1.ResourceMemory, apiv1.ResourcePods} {
			q, ok := g.Template.Capacity[r]
			if !ok || q.Sign() <= 0 {
				add("%s: template.capacity.%s must be positive", where, r)
			}
		}
		for r, q := range g.Template.Allocatable {
			if c, ok := g.Template.Capacity[r]; ok && q.Cmp(c) > 0 {
				add("%s: template.allocatable.%s exceeds capacity", where, r)
			}
		}
		for _, err := range validateTemplate(g.Template) {
			add("%s: template.%v", where, err)
		}
		f := g.Faults
		if f.RegistrationDelay.Duration < 0 {
			add("%s: faults.registrationDelay must not be negative", where)
		}
		if f.ListingDelay.Duration < 0 {
			add("%s: faults.listingDelay must not be negative", where)
		}
		if f.ResourceSliceDelay.Duration < 0 {
			add("%s: faults.resourceSliceDelay must not be negative", where)
		}
		if f.DeletionDelay.Duration < 0 {
			add("%s: faults.deletionDelay must not be negative", where)
		}
		switch f.NodeProviderIDSpelling {
		case "", "emptyHost", "upperScheme":
		default:
			add("%s: faults.nodeProviderIDSpelling must be \"\", \"emptyHost\" or \"upperScheme\", got %q", where, f.NodeProviderIDSpelling)
		}
		for _, r := range []struct {
			name string
			v    float64
		}{{"creationFailureRate", f.CreationFailureRate}, {"neverRegisterRate", f.NeverRegisterRate},
			{"partialFailureRate", f.PartialFailureRate}, {"apiErrorRate", f.APIErrorRate},
			{"lostResponseRate", f.LostResponseRate}} {
			// Written so that NaN fails too.
			if !(r.v >= 0 && r.v <= 1) {
				add("%s: faults.%s: fault rates must be between 0 and 1, got %v", where, r.name, r.v)
			}
		}
		if f.OutOfCapacityAfter < 0 {
			add("%s: faults.outOfCapacityAfter must not be negative", where)
		}
		if o := g.Options; o != nil {
			if u := o.ScaleDownUtilizationThreshold; u != nil && !(*u >= 0 && *u <= 1) {
				add("%s: options.scaleDownUtilizationThreshold must be between 0 and 1, got %v", where, *u)
			}
			if d := o.ScaleDownUnneededTime; d != nil && d.Duration < 0 {
				add("%s: options.scaleDownUnneededTime must not be negative", where)
			}
			if d := o.ScaleDownUnreadyTime; d != nil && d.Duration < 0 {
				add("%s: options.scaleDownUnreadyTime must not be negative", where)
			}
			if d := o.MaxNodeProvisionTime; d != nil && d.Duration <= 0 {
				add("%s: options.maxNodeProvisionTime must be positive", where)
			}
			if d := o.MaxNodeLifetime; d != nil && d.Duration < 0 {
				add("%s: options.maxNodeLifetime must not be negative", where)
			}
		}
	}
	if c.GPULabel != "" {
		for _, msg := range validation.IsQualifiedName(c.GPULabel) {
			add("gpuLabel %q: %s", c.GPULabel, msg)
		}
	}
	return errors.Join(errs...)
}

// validateTemplate applies the API server's rules for the fields the
// template sets on a Node (labels, annotations, taints, resource names and
// quantities), so that a config the provider accepts never makes Nodes the
// API server refuses.
func validateTemplate(t TemplateConfig) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(t.Labels, field.NewPath("labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(t.Annotations, field.NewPath("annotations"))...)
	seen := map[apiv1.Taint]bool{}
	for i, taint := range t.Taints {
		p := field.NewPath("taints").Index(i)
		for _, msg := range validation.IsQualifiedName(taint.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), taint.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(taint.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), taint.Value, msg))
		}
		switch taint.Effect {
		case apiv1.TaintEffectNoSchedule, apiv1.TaintEffectPreferNoSchedule, apiv1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(p.Child("effect"), taint.Effect, []apiv1.TaintEffect{
				apiv1.TaintEffectNoSchedule, apiv1.TaintEffectPreferNoSchedule, apiv1.TaintEffectNoExecute}))
		}
		key := apiv1.Taint{Key: taint.Key, Effect: taint.Effect}
		if seen[key] {
			errs = append(errs, field.Duplicate(p, taint.Key+":"+string(taint.Effect)))
		}
		seen[key] = true
	}
	errs = append(errs, validateDevices(t.Devices, field.NewPath("devices"))...)
	for what, list := range map[string]apiv1.ResourceList{"capacity": t.Capacity, "allocatable": t.Allocatable} {
		for r, q := range list {
			p := field.NewPath(what).Key(string(r))
			for _, msg := range validation.IsQualifiedName(string(r)) {
				errs = append(errs, field.Invalid(p, string(r), msg))
			}
			if q.Sign() < 0 {
				errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
			}
		}
	}
	return errs
}

// defaultTemplate is used for groups that only --nodes defines.
func defaultTemplate() TemplateConfig {
	rl := apiv1.ResourceList{
		apiv1.ResourceCPU:    resource.MustParse("4"),
		apiv1.ResourceMemory: resource.MustParse("16Gi"),
		apiv1.ResourcePods:   resource.MustParse("110"),
	}
	return TemplateConfig{Capacity: rl, Allocatable: rl.DeepCopy()}
}

// MergeNodeSpecs applies --nodes values: an existing group takes the given
// min and max; a new name becomes a group with a 4-CPU, 16Gi template.
func (c *Config) MergeNodeSpecs(specs []string) error {
	for _, s := range specs {
		spec, err := config.ParseNodeGroupSpec(s)
		if err != nil {
			return fmt.Errorf("--nodes: %w", err)
		}
		found := false
		for i := range c.NodeGroups {
			if c.NodeGroups[i].Name == spec.Name {
				c.NodeGroups[i].MinSize, c.NodeGroups[i].MaxSize = spec.Min, spec.Max
				found = true
			}
		}
		if !found {
			c.NodeGroups = append(c.NodeGroups, NodeGroupConfig{Name: spec.Name, MinSize: spec.Min, MaxSize: spec.Max,
				Template: defaultTemplate()})
		}
	}
	return c.Validate()
}
