package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// The template of a group that may launch more than one instance type
// never promises more than the group may launch: its capacity is, resource
// by resource (vCPUs, memory, GPUs, pods), the least of all the types the
// group may launch, and its name and labels are those of the smallest type
// by vCPUs, then memory, then GPUs, then name. For a mixed-instances policy with
// InstanceRequirements (attribute-based selection) the types are those
// GetInstanceTypesFromInstanceRequirements returns for the requirements and
// the group's architecture; for one with instance type overrides, the
// overrides; for a group with neither whose launch template or
// configuration cannot be read, the types of its instances.

// requirementsOverride is one override of a mixed-instances policy that
// selects instance types by their attributes.
type requirementsOverride struct {
	Requirements astypes.InstanceRequirements
	// LaunchTemplate is the override's own launch template, nil for the
	// policy's.
	LaunchTemplate *launchTemplateRef
}

// describeTypesBatch is how many instance types one DescribeInstanceTypes
// names (AWS's limit for InstanceType.N).
const describeTypesBatch = 100

// requirementsRefusedRetry is how long GetInstanceTypesFromInstanceRequirements
// is not called again after IAM refused it.
const requirementsRefusedRetry = 10 * time.Minute

// errNoTypesMatch is the error of requirements AWS has no instance type for.
var errNoTypesMatch = errors.New("no instance type satisfies the instance requirements")

// requirementsRefresh is how long an answer of
// GetInstanceTypesFromInstanceRequirements is used before it is asked again
// (AWS adds instance types; a set of requirements may match new ones). A
// refresh that fails keeps the answer it had.
const requirementsRefresh = time.Hour

// requirementsEntry is a cached answer of GetInstanceTypesFromInstanceRequirements,
// read at at.
type requirementsEntry struct {
	types []string
	at    time.Time
}

// requirementsCache keeps what the requirements path learns: the instance
// types of a set of requirements (keyed by the requirements and the
// architectures asked; requirements rarely change, and a change makes a new
// key), the architecture of images, and when IAM refused the call.
type requirementsCache struct {
	byKey        map[string]requirementsEntry
	imageArch    map[string]ec2types.ArchitectureType // image id -> architecture ("" when AWS does not say)
	refusedUntil time.Time
	logged       map[string]bool
}

// requirements returns the provider's requirements cache (made on first use).
func (p *Provider) requirements() *requirementsCache {
	c := p.facts
	if c.reqs == nil {
		c.reqs = &requirementsCache{byKey: map[string]requirementsEntry{}, imageArch: map[string]ec2types.ArchitectureType{},
			logged: map[string]bool{}}
	}
	return c.reqs
}

// templateType returns the instance type the group's template is built
// from (see the comment at the top of this file).
func (p *Provider) templateType(ctx context.Context, d *groupDesc) (instanceType, error) {
	if len(d.MixedRequirements) > 0 {
		return p.requirementsType(ctx, d)
	}
	if d.Mixed && len(d.MixedOverrides) > 0 {
		types, err := p.describeTypes(ctx, d.MixedOverrides)
		if err != nil {
			return instanceType{}, err
		}
		return minimumType(types), nil
	}
	name, err := p.launchInstanceType(ctx, d)
	if err == nil {
		return p.instanceTypeFacts(ctx, name)
	}
	// A group with instances tells by them: all of their types, not the
	// first one read.
	var names []string
	for _, in := range d.Instances {
		if in.Type != "" && !in.terminating() {
			names = append(names, in.Type)
		}
	}
	if len(names) == 0 {
		return instanceType{}, err
	}
	klog.FromContext(ctx).V(2).Info("Using the instances' types for the template", "nodeGroup", d.Name, "err", err)
	types, terr := p.describeTypes(ctx, names)
	if terr != nil {
		return instanceType{}, terr
	}
	return minimumType(types), nil
}

// describeTypes returns the facts of the named types (duplicates dropped),
// reading those not cached yet describeTypesBatch per call.
func (p *Provider) describeTypes(ctx context.Context, names []string) ([]instanceType, error) {
	c := p.facts
	set := map[string]bool{}
	var missing []string
	c.mu.Lock()
	for _, n := range names {
		if set[n] {
			continue
		}
		set[n] = true
		if _, ok := c.types[n]; !ok {
			missing = append(missing, n)
		}
	}
	c.mu.Unlock()
	sort.Strings(missing)
	for start := 0; start < len(missing); start += describeTypesBatch {
		batch := missing[start:min(start+describeTypesBatch, len(missing))]
		in := &ec2.DescribeInstanceTypesInput{}
		for _, n := range batch {
			in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(n))
		}
		pages := ec2.NewDescribeInstanceTypesPaginator(p.ec2, in, func(o *ec2.DescribeInstanceTypesPaginatorOptions) { o.StopOnDuplicateToken = true })
		for n := 0; pages.HasMorePages(); n++ {
			if n >= maxPages {
				return nil, badDescription("describing instance types: more than %d pages", maxPages)
			}
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, callError(fmt.Sprintf("describing %d instance types", len(batch)), err, true)
			}
			for _, info := range out.InstanceTypes {
				t, err := describeInstanceType(info)
				if err != nil {
					klog.FromContext(ctx).Error(err, "Leaving out an instance type AWS described badly")
					continue
				}
				c.mu.Lock()
				c.types[t.Name] = t
				c.mu.Unlock()
			}
		}
	}
	out := make([]instanceType, 0, len(set))
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := range set {
		t, ok := c.types[n]
		if !ok {
			return nil, fmt.Errorf("instance type %q: AWS does not describe it", n)
		}
		out = append(out, t)
	}
	return out, nil
}

// smaller orders types by vCPUs, then memory, then GPUs, then name.
func smaller(a, b instanceType) bool {
	if a.VCPU != b.VCPU {
		return a.VCPU < b.VCPU
	}
	if a.MemoryMiB != b.MemoryMiB {
		return a.MemoryMiB < b.MemoryMiB
	}
	if a.GPUs != b.GPUs {
		return a.GPUs < b.GPUs
	}
	return a.Name < b.Name
}

// minimumType is the type a template of several types is built from: the
// smallest type (smaller) with, resource by resource, the least of all the
// types (Neuron devices and accelerator memory included), so that it is
// below every one of them. GPUs count only when every
// type has them of one kind (else none are promised), and the GPU label
// only when every type has the same GPU. types must not be empty; the
// result does not depend on their order.
func minimumType(types []instanceType) instanceType {
	sorted := append([]instanceType(nil), types...)
	sort.Slice(sorted, func(i, j int) bool { return smaller(sorted[i], sorted[j]) })
	m := sorted[0]
	pods := func(t instanceType) int64 {
		if t.MaxPods > 0 {
			return t.MaxPods
		}
		return defaultMaxPods
	}
	m.MaxPods = pods(m)
	for _, t := range sorted[1:] {
		m.VCPU = min(m.VCPU, t.VCPU)
		m.MemoryMiB = min(m.MemoryMiB, t.MemoryMiB)
		m.MaxPods = min(m.MaxPods, pods(t))
		if t.GPUMemoryMiB != m.GPUMemoryMiB || !strings.EqualFold(t.GPUName, m.GPUName) {
			m.GPUModelsDiffer = true
		}
		m.GPUMemoryMiB = min(m.GPUMemoryMiB, t.GPUMemoryMiB)
		m.NeuronDevices = min(m.NeuronDevices, t.NeuronDevices)
		m.NeuronCores = min(m.NeuronCores, t.NeuronCores)
		m.NeuronMemoryMiB = min(m.NeuronMemoryMiB, t.NeuronMemoryMiB)
		if t.NeuronName != m.NeuronName {
			m.NeuronName = ""
		}
		switch {
		case t.GPUs == 0 || gpuResourceOf(t) != gpuResourceOf(m):
			m.GPUs = 0
		default:
			m.GPUs = min(m.GPUs, t.GPUs)
			if gpuType(t) != gpuType(m) {
				m.GPUName = "" // the label then names the manufacturer only
			}
		}
	}
	if m.GPUs == 0 {
		m.GPUManufacturer, m.GPUName, m.GPUMemoryMiB = "", "", 0
	}
	if m.NeuronDevices == 0 {
		m.NeuronName, m.NeuronCores, m.NeuronMemoryMiB = "", 0, 0
	}
	return m
}

// requirementsType resolves the attribute-based overrides of a group to
// the type its template takes. AWS answering no type is errNoTypesMatch;
// when IAM refuses GetInstanceTypesFromInstanceRequirements, the template
// is built from the requirements' lower bounds alone (requirementsFloor),
// which every type AWS may launch meets.
func (p *Provider) requirementsType(ctx context.Context, d *groupDesc) (instanceType, error) {
	var all []string
	archOf := map[ec2types.ArchitectureType]bool{}
	for _, o := range d.MixedRequirements {
		ref := d.LaunchTemplate
		if o.LaunchTemplate != nil {
			ref = o.LaunchTemplate
		}
		archs := p.groupArchitectures(ctx, d, ref)
		names, err := p.typesForRequirements(ctx, o.Requirements, archs)
		if errors.Is(err, errRequirementsRefused) {
			return requirementsFloor(d, archs), nil
		}
		if err != nil {
			return instanceType{}, err
		}
		all = append(all, names...)
		for _, a := range archs {
			archOf[a] = true
		}
	}
	if len(all) == 0 {
		err := fmt.Errorf("%w (AWS returned none for the mixed-instances policy of Auto Scaling group %q)", errNoTypesMatch, d.Name)
		key, _ := json.Marshal(d.MixedRequirements)
		p.noteRequirementsOnce(ctx, "none:"+d.Name+string(key), "No instance type satisfies the instance requirements of an "+
			"Auto Scaling group: it has no template and is not scaled from zero", "nodeGroup", d.Name, "err", err)
		return instanceType{}, err
	}
	types, err := p.describeTypes(ctx, all)
	if err != nil {
		return instanceType{}, err
	}
	m := minimumType(types)
	m.Arch = "amd64" // more than one architecture possible: see groupArchitectures
	if len(archOf) == 1 {
		for a := range archOf {
			m.Arch = kubeArch([]ec2types.ArchitectureType{a})
		}
	}
	return m, nil
}

// errRequirementsRefused marks a GetInstanceTypesFromInstanceRequirements
// the IAM policy does not allow.
var errRequirementsRefused = errors.New("ec2:GetInstanceTypesFromInstanceRequirements is not allowed by the IAM policy")

// typesForRequirements returns the instance types AWS has for the
// requirements and architectures (every page), cached by both.
func (p *Provider) typesForRequirements(ctx context.Context, req astypes.InstanceRequirements, archs []ec2types.ArchitectureType) ([]string, error) {
	ec2req, key, err := toEC2Requirements(req, archs)
	if err != nil {
		return nil, err
	}
	now := p.clock.Now()
	c := p.facts
	c.mu.Lock()
	rc := p.requirements()
	e, ok := rc.byKey[key]
	refused := now.Before(rc.refusedUntil)
	c.mu.Unlock()
	if ok && now.Sub(e.at) < requirementsRefresh {
		return e.types, nil
	}
	if refused {
		if ok {
			return e.types, nil
		}
		return nil, errRequirementsRefused
	}
	names, err := p.readRequirementsTypes(ctx, archs, ec2req, rc, now)
	if err != nil {
		if ok {
			klog.FromContext(ctx).V(2).Info("Refreshing the instance types of instance requirements failed; keeping those read before",
				"requirements", key, "readAt", e.at, "err", err)
			return e.types, nil
		}
		return nil, err
	}
	c.mu.Lock()
	rc.byKey[key] = requirementsEntry{types: names, at: now}
	c.mu.Unlock()
	klog.FromContext(ctx).V(4).Info("Read the instance types of instance requirements", "requirements", key, "types", len(names))
	return names, nil
}

// readRequirementsTypes asks AWS for the instance types of the requirements
// (every page), in name order.
func (p *Provider) readRequirementsTypes(ctx context.Context, archs []ec2types.ArchitectureType,
	ec2req *ec2types.InstanceRequirementsRequest, rc *requirementsCache, now time.Time) ([]string, error) {
	c := p.facts
	in := &ec2.GetInstanceTypesFromInstanceRequirementsInput{ArchitectureTypes: archs,
		VirtualizationTypes: []ec2types.VirtualizationType{ec2types.VirtualizationTypeHvm}, InstanceRequirements: ec2req}
	pages := ec2.NewGetInstanceTypesFromInstanceRequirementsPaginator(p.ec2, in,
		func(o *ec2.GetInstanceTypesFromInstanceRequirementsPaginatorOptions) { o.StopOnDuplicateToken = true })
	var names []string
	for n := 0; pages.HasMorePages(); n++ {
		if n >= maxPages {
			return nil, badDescription("instance types from instance requirements: more than %d pages", maxPages)
		}
		out, err := pages.NextPage(ctx)
		if err != nil {
			err = callError("getting the instance types of instance requirements", err, true)
			if isAccessDenied(err) {
				c.mu.Lock()
				rc.refusedUntil = now.Add(requirementsRefusedRetry)
				c.mu.Unlock()
				klog.FromContext(ctx).Info("GetInstanceTypesFromInstanceRequirements refused by the IAM policy: templates of groups "+
					"with instance requirements take the requirements' minimum vCPUs and memory; add ec2:GetInstanceTypesFromInstanceRequirements "+
					"for the smallest matching type", "retryIn", requirementsRefusedRetry, "err", err)
				return nil, fmt.Errorf("%w: %w", errRequirementsRefused, err)
			}
			return nil, err
		}
		for _, t := range out.InstanceTypes {
			if n := deref(t.InstanceType); n != "" {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}

// toEC2Requirements translates Auto Scaling's InstanceRequirements into
// EC2's request shape (the fields have the same names and meanings), and
// returns the cache key of the request with archs.
func toEC2Requirements(req astypes.InstanceRequirements, archs []ec2types.ArchitectureType) (*ec2types.InstanceRequirementsRequest, string, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, "", fmt.Errorf("instance requirements: %w", err)
	}
	out := &ec2types.InstanceRequirementsRequest{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, "", fmt.Errorf("instance requirements: %w", err)
	}
	a := make([]string, len(archs))
	for i, x := range archs {
		a[i] = string(x)
	}
	return out, strings.Join(a, ",") + " " + string(raw), nil
}

// requirementsFloor is the template type when the types of the
// requirements cannot be read: the requirements' minimum vCPUs and memory
// (AWS requires both), GPUs only when the requirements allow nothing but
// GPUs of one manufacturer, no instance type label.
func requirementsFloor(d *groupDesc, archs []ec2types.ArchitectureType) instanceType {
	t := instanceType{Arch: "amd64", MaxPods: defaultMaxPods}
	if len(archs) == 1 {
		t.Arch = kubeArch(archs)
	}
	for i, o := range d.MixedRequirements {
		r := o.Requirements
		vcpu, mem := int64(1), int64(1)
		if r.VCpuCount != nil {
			vcpu = max(1, int64(deref(r.VCpuCount.Min)))
		}
		if r.MemoryMiB != nil {
			mem = max(1, int64(deref(r.MemoryMiB.Min)))
		}
		var gpus int64
		var maker string
		if r.AcceleratorCount != nil && len(r.AcceleratorTypes) == 1 && r.AcceleratorTypes[0] == astypes.AcceleratorTypeGpu &&
			len(r.AcceleratorManufacturers) == 1 {
			gpus, maker = int64(deref(r.AcceleratorCount.Min)), string(r.AcceleratorManufacturers[0])
		}
		if i == 0 {
			t.VCPU, t.MemoryMiB, t.GPUs, t.GPUManufacturer = vcpu, mem, gpus, maker
			continue
		}
		t.VCPU, t.MemoryMiB = min(t.VCPU, vcpu), min(t.MemoryMiB, mem)
		if maker != t.GPUManufacturer {
			gpus = 0
		}
		t.GPUs = min(t.GPUs, gpus)
	}
	if t.GPUs == 0 {
		t.GPUManufacturer = "" // with GPUs, the label names the manufacturer only
	}
	return t
}

// groupArchitectures returns the EC2 architectures to ask instance types
// for: the arch of the group's kubernetes.io/arch node-template label tag,
// else that of the launch template's image (DescribeImages), else both
// x86_64 and arm64 (the template then takes the least of both sets of
// types, and is labelled amd64, the architecture a template takes
// elsewhere when AWS does not say; the label tag corrects it).
func (p *Provider) groupArchitectures(ctx context.Context, d *groupDesc, ref *launchTemplateRef) []ec2types.ArchitectureType {
	switch d.Tags[LabelTagPrefix+apiv1.LabelArchStable] {
	case "amd64":
		return []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}
	case "arm64":
		return []ec2types.ArchitectureType{ec2types.ArchitectureTypeArm64}
	}
	if ref != nil {
		arch, err := p.templateImageArch(ctx, *ref)
		switch {
		case err != nil:
			p.noteRequirementsOnce(ctx, "arch:"+d.Name, "Architecture of the launch template's image unknown; asking for x86_64 and arm64 types",
				"nodeGroup", d.Name, "launchTemplate", ref.String(), "err", err)
		case arch == ec2types.ArchitectureTypeX8664 || arch == ec2types.ArchitectureTypeArm64:
			return []ec2types.ArchitectureType{arch}
		}
	}
	return []ec2types.ArchitectureType{ec2types.ArchitectureTypeArm64, ec2types.ArchitectureTypeX8664}
}

// templateImageArch reads the image of a launch template version
// (cached as its instance type is: for launchTTL, or for good for a
// numbered version) and the image's
// architecture (cached for ever: an image's architecture never changes).
func (p *Provider) templateImageArch(ctx context.Context, ref launchTemplateRef) (ec2types.ArchitectureType, error) {
	image, err := p.cachedLaunch(ctx, "image:"+ref.String(), ref.numbered(), func() (string, error) { return p.templateImage(ctx, ref) })
	if err != nil {
		return "", err
	}
	c := p.facts
	c.mu.Lock()
	arch, ok := p.requirements().imageArch[image]
	c.mu.Unlock()
	if ok {
		return arch, nil
	}
	out, err := p.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{image}})
	if err != nil {
		return "", callError(fmt.Sprintf("describing image %s", image), err, true)
	}
	for _, im := range out.Images {
		if deref(im.ImageId) == image {
			arch = ec2types.ArchitectureType(im.Architecture)
			c.mu.Lock()
			p.requirements().imageArch[image] = arch
			c.mu.Unlock()
			return arch, nil
		}
	}
	return "", fmt.Errorf("image %s: AWS does not describe it", image)
}

// templateImage returns the image id a launch template version names.
func (p *Provider) templateImage(ctx context.Context, ref launchTemplateRef) (string, error) {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{ref.version()}}
	if ref.ID != "" {
		in.LaunchTemplateId = aws.String(ref.ID)
	} else {
		in.LaunchTemplateName = aws.String(ref.Name)
	}
	out, err := p.ec2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return "", callError(fmt.Sprintf("describing launch template %s", ref), err, true)
	}
	for _, v := range out.LaunchTemplateVersions {
		if v.LaunchTemplateData != nil && strings.HasPrefix(deref(v.LaunchTemplateData.ImageId), "ami-") {
			return deref(v.LaunchTemplateData.ImageId), nil
		}
	}
	return "", fmt.Errorf("launch template %s names no image id (an SSM parameter is not resolved)", ref)
}

// noteRequirementsOnce logs msg once per key.
func (p *Provider) noteRequirementsOnce(ctx context.Context, key, msg string, kv ...any) {
	c := p.facts
	c.mu.Lock()
	rc := p.requirements()
	logged := rc.logged[key]
	rc.logged[key] = true
	c.mu.Unlock()
	if !logged {
		klog.FromContext(ctx).Info(msg, kv...)
	}
}

// overrideTemplate is the launch template an override names for itself,
// nil when it uses the policy's.
func overrideTemplate(o astypes.LaunchTemplateOverrides) *launchTemplateRef {
	spec := o.LaunchTemplateSpecification
	if spec == nil || (deref(spec.LaunchTemplateId) == "" && deref(spec.LaunchTemplateName) == "") {
		return nil
	}
	return &launchTemplateRef{ID: deref(spec.LaunchTemplateId), Name: deref(spec.LaunchTemplateName), Version: deref(spec.Version)}
}
