package awsfake

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// IntRange is a Min/Max pair of InstanceRequirements; nil is no bound.
type IntRange struct{ Min, Max *int }

// FloatRange is a Min/Max pair of decimals (MemoryGiBPerVCpu).
type FloatRange struct{ Min, Max *float64 }

// InstanceRequirements selects instance types by their attributes, as the
// InstanceRequirements of a mixed-instances policy's override (Auto
// Scaling) and the InstanceRequirementsRequest of
// GetInstanceTypesFromInstanceRequirements (EC2) do.
//
// The fake honours these fields, with the AWS API reference's meanings and
// defaults: VCpuCount and MemoryMiB (Min required), MemoryGiBPerVCpu,
// AcceleratorCount (Max 0 excludes types with accelerators),
// AcceleratorTypes, AcceleratorManufacturers and AcceleratorNames (they
// constrain types that have accelerators; the fake's accelerators are GPUs,
// type "gpu", named by the lower-cased GPU name, e.g. "t4"),
// AcceleratorTotalMemoryMiB, AllowedInstanceTypes and ExcludedInstanceTypes
// (with the "*" wildcard; not both), BurstablePerformance (default
// excluded), BareMetal (default excluded), LocalStorage (default included)
// and InstanceGenerations (the fake's types are current-generation, not bare
// metal, without local storage). The price-protection fields are accepted
// and ignored (the fake has no prices). Any other field is refused with
// InvalidParameterValue rather than ignored.
type InstanceRequirements struct {
	VCpuCount                 IntRange
	MemoryMiB                 IntRange
	MemoryGiBPerVCpu          FloatRange
	AcceleratorCount          IntRange
	AcceleratorTotalMemoryMiB IntRange
	AcceleratorTypes          []string
	AcceleratorManufacturers  []string
	AcceleratorNames          []string
	AllowedInstanceTypes      []string
	ExcludedInstanceTypes     []string
	InstanceGenerations       []string
	BurstablePerformance      string
	BareMetal                 string
	LocalStorage              string
}

// AddImage registers an AMI with its architecture (x86_64 or arm64), for
// DescribeImages.
func (s *Server) AddImage(id, arch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.images == nil {
		s.images = map[string]string{}
	}
	s.images[id] = arch
}

// matches reports whether t satisfies r.
func (r *InstanceRequirements) matches(t InstanceType) bool {
	in := func(n int, rg IntRange) bool {
		return (rg.Min == nil || n >= *rg.Min) && (rg.Max == nil || n <= *rg.Max)
	}
	if !in(t.VCPU, r.VCpuCount) || !in(int(t.MemoryMiB), r.MemoryMiB) || !in(t.GPUs, r.AcceleratorCount) ||
		!in(int(t.GPUMemoryMiB)*t.GPUs, r.AcceleratorTotalMemoryMiB) {
		return false
	}
	perVCPU := float64(t.MemoryMiB) / 1024 / float64(max(1, t.VCPU))
	if g := r.MemoryGiBPerVCpu; (g.Min != nil && perVCPU < *g.Min) || (g.Max != nil && perVCPU > *g.Max) {
		return false
	}
	if t.GPUs > 0 {
		if len(r.AcceleratorTypes) > 0 && !slices.Contains(r.AcceleratorTypes, "gpu") {
			return false
		}
		if len(r.AcceleratorManufacturers) > 0 && !slices.Contains(r.AcceleratorManufacturers, strings.ToLower(t.GPUManufacturer)) {
			return false
		}
		if len(r.AcceleratorNames) > 0 && !slices.Contains(r.AcceleratorNames, strings.ToLower(t.GPUName)) {
			return false
		}
	}
	if len(r.AllowedInstanceTypes) > 0 && !matchesAny(t.Name, r.AllowedInstanceTypes) {
		return false
	}
	if matchesAny(t.Name, r.ExcludedInstanceTypes) {
		return false
	}
	switch {
	case t.Burstable && r.BurstablePerformance != "included" && r.BurstablePerformance != "required":
		return false
	case !t.Burstable && r.BurstablePerformance == "required":
		return false
	case r.BareMetal == "required", r.LocalStorage == "required":
		return false
	case len(r.InstanceGenerations) > 0 && !slices.Contains(r.InstanceGenerations, "current"):
		return false
	}
	return true
}

// matchesAny matches a type name against patterns with "*" wildcards.
func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

// ignoredRequirements are request fields the fake accepts without effect.
var ignoredRequirements = map[string]bool{
	"SpotMaxPricePercentageOverLowestPrice":          true,
	"OnDemandMaxPricePercentageOverLowestPrice":      true,
	"MaxSpotPriceAsPercentageOfOptimalOnDemandPrice": true,
}

// parseRequirements reads InstanceRequirements.* of an EC2 query request.
func parseRequirements(form url.Values) (*InstanceRequirements, *apiError) {
	const p = "InstanceRequirements."
	r := &InstanceRequirements{}
	intRanges := map[string]*IntRange{"VCpuCount": &r.VCpuCount, "MemoryMiB": &r.MemoryMiB,
		"AcceleratorCount": &r.AcceleratorCount, "AcceleratorTotalMemoryMiB": &r.AcceleratorTotalMemoryMiB}
	lists := map[string]*[]string{"AcceleratorType": &r.AcceleratorTypes, "AcceleratorManufacturer": &r.AcceleratorManufacturers,
		"AcceleratorName": &r.AcceleratorNames, "AllowedInstanceType": &r.AllowedInstanceTypes,
		"ExcludedInstanceType": &r.ExcludedInstanceTypes, "InstanceGeneration": &r.InstanceGenerations}
	enums := map[string]*string{"BurstablePerformance": &r.BurstablePerformance, "BareMetal": &r.BareMetal, "LocalStorage": &r.LocalStorage}
	for k := range form {
		rest, ok := strings.CutPrefix(k, p)
		if !ok {
			continue
		}
		field, sub, _ := strings.Cut(rest, ".")
		_, isInt := intRanges[field]
		_, isList := lists[field]
		_, isEnum := enums[field]
		if !isInt && !isList && !isEnum && field != "MemoryGiBPerVCpu" && !ignoredRequirements[field] {
			return nil, ec2Error("InvalidParameterValue", "awsfake does not implement the instance requirement %s", field)
		}
		if (isInt || field == "MemoryGiBPerVCpu") && sub != "Min" && sub != "Max" {
			return nil, ec2Error("InvalidParameterValue", "unknown parameter %s", k)
		}
	}
	for name, rg := range intRanges {
		for _, b := range []struct {
			key string
			dst **int
		}{{"Min", &rg.Min}, {"Max", &rg.Max}} {
			raw := form.Get(p + name + "." + b.key)
			if raw == "" {
				continue
			}
			n, err := strconv.Atoi(raw)
			if err != nil || n < 0 {
				return nil, ec2Error("InvalidParameterValue", "Value (%s) for parameter %s%s.%s is invalid.", raw, p, name, b.key)
			}
			*b.dst = &n
		}
	}
	for _, b := range []struct {
		key string
		dst **float64
	}{{"Min", &r.MemoryGiBPerVCpu.Min}, {"Max", &r.MemoryGiBPerVCpu.Max}} {
		if raw := form.Get(p + "MemoryGiBPerVCpu." + b.key); raw != "" {
			f, err := strconv.ParseFloat(raw, 64)
			if err != nil || f < 0 {
				return nil, ec2Error("InvalidParameterValue", "Value (%s) for parameter %sMemoryGiBPerVCpu.%s is invalid.", raw, p, b.key)
			}
			*b.dst = &f
		}
	}
	for name, dst := range lists {
		*dst = listParam(form, p+name)
	}
	for name, dst := range enums {
		*dst = form.Get(p + name)
	}
	if r.VCpuCount.Min == nil || r.MemoryMiB.Min == nil {
		return nil, ec2Error("MissingParameter", "The request must contain the parameters InstanceRequirements.VCpuCount.Min and InstanceRequirements.MemoryMiB.Min")
	}
	if len(r.AllowedInstanceTypes) > 0 && len(r.ExcludedInstanceTypes) > 0 {
		return nil, ec2Error("InvalidParameterCombination", "You can specify AllowedInstanceTypes or ExcludedInstanceTypes, but not both.")
	}
	return r, nil
}

// getInstanceTypesFromInstanceRequirements answers
// GetInstanceTypesFromInstanceRequirements: the fake's types that support
// one of ArchitectureType.N (required), whose virtualization (always hvm)
// is one of VirtualizationType.N (required), and that satisfy the
// requirements; sorted by name, MaxResults (1-1000) per page.
func (s *Server) getInstanceTypesFromInstanceRequirements(form url.Values) (any, *apiError) {
	archs, virt := listParam(form, "ArchitectureType"), listParam(form, "VirtualizationType")
	if len(archs) == 0 || len(virt) == 0 {
		return nil, ec2Error("MissingParameter", "The request must contain the parameters ArchitectureType and VirtualizationType")
	}
	r, aerr := parseRequirements(form)
	if aerr != nil {
		return nil, aerr
	}
	limit, aerr := intParam(form, "MaxResults", 1000, 1, 1000, func(f string, a ...any) *apiError {
		return ec2Error("InvalidParameterValue", f, a...)
	})
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	var keys []string
	for n, t := range s.instanceTypes {
		if slices.Contains(archs, archOf(t)) && slices.Contains(virt, "hvm") && r.matches(t) {
			keys = append(keys, n)
		}
	}
	s.mu.Unlock()
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidPaginationToken")
	if aerr != nil {
		return nil, aerr
	}
	type item struct {
		InstanceType string `xml:"instanceType"`
	}
	out := struct {
		InstanceTypes []item `xml:"instanceTypeSet>item"`
		NextToken     string `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, n := range page {
		out.InstanceTypes = append(out.InstanceTypes, item{n})
	}
	return out, nil
}

func archOf(t InstanceType) string {
	if t.Arch == "" {
		return "x86_64"
	}
	return t.Arch
}

// describeImages answers DescribeImages for ImageId.N: the images AddImage
// registered (InvalidAMIID.NotFound for another).
func (s *Server) describeImages(form url.Values) (any, *apiError) {
	if aerr := noFilters(form); aerr != nil {
		return nil, aerr
	}
	ids := listParam(form, "ImageId")
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		for id := range s.images {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	type xmlImage struct {
		ImageID            string `xml:"imageId"`
		ImageState         string `xml:"imageState"`
		Architecture       string `xml:"architecture"`
		ImageType          string `xml:"imageType"`
		VirtualizationType string `xml:"virtualizationType"`
		OwnerID            string `xml:"imageOwnerId"`
	}
	out := struct {
		Images []xmlImage `xml:"imagesSet>item"`
	}{}
	for _, id := range ids {
		arch, ok := s.images[id]
		if !ok {
			return nil, ec2Error("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
		out.Images = append(out.Images, xmlImage{ImageID: id, ImageState: "available", Architecture: arch, ImageType: "machine",
			VirtualizationType: "hvm", OwnerID: accountID})
	}
	return out, nil
}

// requirementsLaunchType is the type a group with instance requirements
// launches: the smallest matching type (by vCPUs, memory, name) of its
// launch template image's architecture (x86_64 when the fake does not know
// the image), standing in for AWS's allocation strategy. Called with s.mu
// held.
func (s *Server) requirementsLaunchType(g *groupState, image string) (string, *launchFailure) {
	arch := s.images[image]
	if arch == "" {
		arch = "x86_64"
	}
	var best *InstanceType
	for _, t := range s.instanceTypes {
		if archOf(t) != arch || !g.MixedInstances.Requirements.matches(t) {
			continue
		}
		if best == nil || t.VCPU < best.VCPU || (t.VCPU == best.VCPU && (t.MemoryMiB < best.MemoryMiB ||
			(t.MemoryMiB == best.MemoryMiB && t.Name < best.Name))) {
			best = &t
		}
	}
	if best == nil {
		return "", &launchFailure{code: "InvalidParameterValue",
			message: fmt.Sprintf("No instance type of architecture %s satisfies the instance requirements of the group", arch)}
	}
	return best.Name, nil
}

// xmlRange and xmlRequirements render InstanceRequirements in a
// DescribeAutoScalingGroups answer.
type xmlRange struct {
	Min *int `xml:",omitempty"`
	Max *int `xml:",omitempty"`
}

type xmlFloatRange struct {
	Min *float64 `xml:",omitempty"`
	Max *float64 `xml:",omitempty"`
}

type xmlRequirements struct {
	VCpuCount                 *xmlRange
	MemoryMiB                 *xmlRange
	MemoryGiBPerVCpu          *xmlFloatRange `xml:",omitempty"`
	AcceleratorCount          *xmlRange      `xml:",omitempty"`
	AcceleratorTotalMemoryMiB *xmlRange      `xml:",omitempty"`
	AcceleratorTypes          []string       `xml:"AcceleratorTypes>member"`
	AcceleratorManufacturers  []string       `xml:"AcceleratorManufacturers>member"`
	AcceleratorNames          []string       `xml:"AcceleratorNames>member"`
	AllowedInstanceTypes      []string       `xml:"AllowedInstanceTypes>member"`
	ExcludedInstanceTypes     []string       `xml:"ExcludedInstanceTypes>member"`
	InstanceGenerations       []string       `xml:"InstanceGenerations>member"`
	BurstablePerformance      string         `xml:",omitempty"`
	BareMetal                 string         `xml:",omitempty"`
	LocalStorage              string         `xml:",omitempty"`
}

func renderRange(r IntRange) *xmlRange {
	if r.Min == nil && r.Max == nil {
		return nil
	}
	return &xmlRange{Min: r.Min, Max: r.Max}
}

func renderRequirements(r *InstanceRequirements) *xmlRequirements {
	out := &xmlRequirements{VCpuCount: renderRange(r.VCpuCount), MemoryMiB: renderRange(r.MemoryMiB),
		AcceleratorCount: renderRange(r.AcceleratorCount), AcceleratorTotalMemoryMiB: renderRange(r.AcceleratorTotalMemoryMiB),
		AcceleratorTypes: r.AcceleratorTypes, AcceleratorManufacturers: r.AcceleratorManufacturers,
		AcceleratorNames: r.AcceleratorNames, AllowedInstanceTypes: r.AllowedInstanceTypes,
		ExcludedInstanceTypes: r.ExcludedInstanceTypes, InstanceGenerations: r.InstanceGenerations,
		BurstablePerformance: r.BurstablePerformance, BareMetal: r.BareMetal, LocalStorage: r.LocalStorage}
	if g := r.MemoryGiBPerVCpu; g.Min != nil || g.Max != nil {
		out.MemoryGiBPerVCpu = &xmlFloatRange{Min: g.Min, Max: g.Max}
	}
	return out
}

// templateImage is the AMI of a launch template spec's version ("" when
// it has none or does not resolve). Called with s.mu held.
func (s *Server) templateImage(spec LaunchTemplateSpec) string {
	if lt := s.findTemplate(spec.ID, spec.Name); lt != nil {
		if v, ok := resolveVersion(lt, spec.Version); ok {
			return v.ImageID
		}
	}
	return ""
}
