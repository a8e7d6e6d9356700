package awsfake

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

type xmlInstanceType struct {
	InstanceType      string `xml:"instanceType"`
	CurrentGeneration bool   `xml:"currentGeneration"`
	ProcessorInfo     struct {
		SupportedArchitectures []string `xml:"supportedArchitectures>item"`
	} `xml:"processorInfo"`
	VCPUInfo struct {
		DefaultVCPUs int `xml:"defaultVCpus"`
	} `xml:"vCpuInfo"`
	MemoryInfo struct {
		SizeInMiB int64 `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
	NetworkInfo struct {
		MaximumNetworkInterfaces  int `xml:"maximumNetworkInterfaces"`
		IPv4AddressesPerInterface int `xml:"ipv4AddressesPerInterface"`
	} `xml:"networkInfo"`
	GPUInfo    *xmlGPUInfo    `xml:"gpuInfo,omitempty"`
	NeuronInfo *xmlNeuronInfo `xml:"neuronInfo,omitempty"`
}

type xmlNeuronInfo struct {
	Devices []xmlNeuronDevice `xml:"neuronDevices>item"`
	// TotalMemoryInMiB is the memory of all the type's Neuron devices.
	TotalMemoryInMiB int64 `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xmlNeuronDevice struct {
	Count    int    `xml:"count"`
	Name     string `xml:"name"`
	CoreInfo struct {
		Count int `xml:"count"`
	} `xml:"coreInfo"`
	MemoryInfo struct {
		SizeInMiB int64 `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
}

type xmlGPUInfo struct {
	GPUs []xmlGPU `xml:"gpus>item"`
	// TotalGPUMemoryInMiB is the memory of all the type's GPUs.
	TotalGPUMemoryInMiB int64 `xml:"totalGpuMemoryInMiB"`
}

type xmlGPU struct {
	Count        int    `xml:"count"`
	Manufacturer string `xml:"manufacturer"`
	Name         string `xml:"name"`
	MemoryInfo   struct {
		SizeInMiB int64 `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
}

// describeInstanceTypes answers DescribeInstanceTypes.
func (s *Server) describeInstanceTypes(form url.Values) (any, *apiError) {
	if aerr := noFilters(form); aerr != nil {
		return nil, aerr
	}
	limit, aerr := intParam(form, "MaxResults", 100, 5, 100, func(f string, a ...any) *apiError {
		return ec2Error("InvalidParameterValue", f, a...)
	})
	if aerr != nil {
		return nil, aerr
	}
	wanted := listParam(form, "InstanceType")
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys, missing []string
	if len(wanted) > 0 {
		seen := map[string]bool{}
		for _, n := range wanted {
			if _, ok := s.instanceTypes[n]; !ok {
				missing = append(missing, n)
			} else if !seen[n] {
				seen[n] = true
				keys = append(keys, n)
			}
		}
	} else {
		for n := range s.instanceTypes {
			keys = append(keys, n)
		}
	}
	if len(missing) > 0 {
		return nil, ec2Error("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
	}
	sort.Strings(keys)
	page, next, aerr := paginate(keys, form.Get("NextToken"), limit, "InvalidPaginationToken")
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		InstanceTypes []xmlInstanceType `xml:"instanceTypeSet>item"`
		NextToken     string            `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, n := range page {
		out.InstanceTypes = append(out.InstanceTypes, renderInstanceType(s.instanceTypes[n]))
	}
	return out, nil
}

// renderInstanceType renders an instance type.
func renderInstanceType(t InstanceType) xmlInstanceType {
	out := xmlInstanceType{InstanceType: t.Name, CurrentGeneration: true}
	arch := t.Arch
	if arch == "" {
		arch = "x86_64"
	}
	out.ProcessorInfo.SupportedArchitectures = []string{arch}
	out.VCPUInfo.DefaultVCPUs = t.VCPU
	out.MemoryInfo.SizeInMiB = t.MemoryMiB
	out.NetworkInfo.MaximumNetworkInterfaces = t.MaxENIs
	out.NetworkInfo.IPv4AddressesPerInterface = t.IPv4PerENI
	if t.GPUs > 0 {
		g := xmlGPU{Count: t.GPUs, Manufacturer: t.GPUManufacturer, Name: t.GPUName}
		g.MemoryInfo.SizeInMiB = t.GPUMemoryMiB
		out.GPUInfo = &xmlGPUInfo{GPUs: []xmlGPU{g}, TotalGPUMemoryInMiB: t.GPUMemoryMiB * int64(t.GPUs)}
	}
	if t.NeuronDevices > 0 {
		d := xmlNeuronDevice{Count: t.NeuronDevices, Name: t.NeuronName}
		d.CoreInfo.Count = t.NeuronCores
		d.MemoryInfo.SizeInMiB = t.NeuronMemoryMiB
		out.NeuronInfo = &xmlNeuronInfo{Devices: []xmlNeuronDevice{d}, TotalMemoryInMiB: t.NeuronMemoryMiB * int64(t.NeuronDevices)}
	}
	return out
}

type xmlLaunchTemplateVersion struct {
	LaunchTemplateID   string `xml:"launchTemplateId"`
	LaunchTemplateName string `xml:"launchTemplateName"`
	VersionNumber      int64  `xml:"versionNumber"`
	CreateTime         string `xml:"createTime"`
	DefaultVersion     bool   `xml:"defaultVersion"`
	LaunchTemplateData struct {
		InstanceType  string `xml:"instanceType,omitempty"`
		ImageID       string `xml:"imageId"`
		MarketOptions *struct {
			MarketType string `xml:"marketType"`
		} `xml:"instanceMarketOptions,omitempty"`
		CapacityReservation *xmlCapacityReservationSpec `xml:"capacityReservationSpecification,omitempty"`
	} `xml:"launchTemplateData"`
}

// describeLaunchTemplateVersions answers DescribeLaunchTemplateVersions.
func (s *Server) describeLaunchTemplateVersions(form url.Values) (any, *apiError) {
	id, name := form.Get("LaunchTemplateId"), form.Get("LaunchTemplateName")
	if id != "" && name != "" {
		return nil, ec2Error("InvalidParameterCombination", "Specify either a launch template ID or a launch template name, but not both.")
	}
	if id == "" && name == "" {
		return nil, ec2Error("MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lt := s.findTemplate(id, name)
	switch {
	case lt == nil && id != "":
		return nil, ec2Error("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case lt == nil:
		return nil, ec2Error("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
	}
	var versions []LaunchTemplateVersion
	if want := listParam(form, "LaunchTemplateVersion"); len(want) > 0 {
		for _, w := range want {
			v, ok := resolveVersion(lt, w)
			if !ok {
				return nil, ec2Error("InvalidLaunchTemplateId.VersionNotFound",
					"Could not find launch template version %s for launch template ID %s.", w, lt.ID)
			}
			versions = append(versions, v)
		}
	} else {
		versions = sortedVersions(lt)
	}
	def := defaultVersion(lt)
	out := struct {
		Versions []xmlLaunchTemplateVersion `xml:"launchTemplateVersionSet>item"`
	}{}
	for _, v := range versions {
		x := xmlLaunchTemplateVersion{
			LaunchTemplateID:   lt.ID,
			LaunchTemplateName: lt.Name,
			VersionNumber:      v.Number,
			CreateTime:         time.Unix(0, 0).UTC().Format(asgTimeFormat),
			DefaultVersion:     v.Number == def,
		}
		x.LaunchTemplateData.InstanceType = v.InstanceType
		x.LaunchTemplateData.ImageID = "ami-00000000000000000"
		if v.MarketType != "" {
			x.LaunchTemplateData.MarketOptions = &struct {
				MarketType string `xml:"marketType"`
			}{v.MarketType}
		}
		if v.ImageID != "" {
			x.LaunchTemplateData.ImageID = v.ImageID
		}
		x.LaunchTemplateData.CapacityReservation = renderReservationSpec(v.CapacityReservation) // reservations.go
		out.Versions = append(out.Versions, x)
	}
	return out, nil
}

// describeSubnets answers DescribeSubnets.
func (s *Server) describeSubnets(form url.Values) (any, *apiError) {
	if aerr := noFilters(form); aerr != nil {
		return nil, aerr
	}
	wanted := listParam(form, "SubnetId")
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	if len(wanted) > 0 {
		for _, id := range wanted {
			if _, ok := s.subnets[id]; !ok {
				return nil, ec2Error("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
			}
			ids = append(ids, id)
		}
	} else {
		for id := range s.subnets {
			ids = append(ids, id)
		}
		sort.Strings(ids)
	}
	type xmlSubnet struct {
		SubnetID                string `xml:"subnetId"`
		State                   string `xml:"state"`
		VpcID                   string `xml:"vpcId"`
		CidrBlock               string `xml:"cidrBlock"`
		AvailableIPAddressCount int    `xml:"availableIpAddressCount"`
		AvailabilityZone        string `xml:"availabilityZone"`
		AvailabilityZoneID      string `xml:"availabilityZoneId"`
		OwnerID                 string `xml:"ownerId"`
	}
	out := struct {
		Subnets []xmlSubnet `xml:"subnetSet>item"`
	}{}
	for i, id := range ids {
		zone := s.subnets[id]
		out.Subnets = append(out.Subnets, xmlSubnet{
			SubnetID: id, State: "available", VpcID: "vpc-00000000000000000",
			CidrBlock:               "10.0." + strconv.Itoa(i%256) + ".0/24",
			AvailableIPAddressCount: 251,
			AvailabilityZone:        zone,
			AvailabilityZoneID:      "use1-az" + strconv.Itoa(i%6+1),
			OwnerID:                 accountID,
		})
	}
	return out, nil
}

// noFilters refuses EC2 Filter.N parameters, which the fake does not
// implement: a caller relying on them learns it at once instead of getting
// an unfiltered answer.
func noFilters(form url.Values) *apiError {
	for k := range form {
		if strings.HasPrefix(k, "Filter.") {
			return ec2Error("InvalidParameterValue", "awsfake does not implement the Filter parameter (%s)", k)
		}
	}
	return nil
}
