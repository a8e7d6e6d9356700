package awsfake

// AcceleratedInstanceTypes are EC2 instance types with GPUs or AWS Neuron
// devices, as the EC2 documentation of accelerated computing types lists
// them (vCPUs, memory, accelerators and the memory of each, network
// interfaces and IPv4 addresses per interface), and one general purpose
// type without accelerator; a test adds those it needs with AddInstanceType.
func AcceleratedInstanceTypes() []InstanceType {
	const gib = 1024
	nvidia := func(name string, vcpu int, memGiB int64, gpus int, model string, gpuGiB int64, enis, ips int) InstanceType {
		return InstanceType{Name: name, VCPU: vcpu, MemoryMiB: memGiB * gib, Arch: "x86_64", GPUs: gpus, GPUManufacturer: "NVIDIA",
			GPUName: model, GPUMemoryMiB: gpuGiB * gib, MaxENIs: enis, IPv4PerENI: ips}
	}
	neuron := func(name string, vcpu int, memGiB int64, devices int, model string, cores int, devGiB int64, enis, ips int) InstanceType {
		return InstanceType{Name: name, VCPU: vcpu, MemoryMiB: memGiB * gib, Arch: "x86_64", NeuronDevices: devices, NeuronName: model,
			NeuronCores: cores, NeuronMemoryMiB: devGiB * gib, MaxENIs: enis, IPv4PerENI: ips}
	}
	return []InstanceType{
		nvidia("p4d.24xlarge", 96, 1152, 8, "A100", 40, 15, 50),
		nvidia("p4de.24xlarge", 96, 1152, 8, "A100", 80, 15, 50),
		nvidia("p5.48xlarge", 192, 2048, 8, "H100", 80, 32, 50),
		nvidia("g5.xlarge", 4, 16, 1, "A10G", 24, 4, 15),
		nvidia("g5.12xlarge", 48, 192, 4, "A10G", 24, 8, 30),
		nvidia("g6.xlarge", 4, 16, 1, "L4", 24, 4, 15),
		nvidia("g6.12xlarge", 48, 192, 4, "L4", 24, 8, 30),
		nvidia("g4dn.xlarge", 4, 16, 1, "T4", 16, 3, 10),
		neuron("inf2.xlarge", 4, 16, 1, "Inferentia2", 2, 32, 4, 15),
		neuron("inf2.48xlarge", 192, 768, 12, "Inferentia2", 2, 32, 15, 50),
		neuron("trn1.2xlarge", 8, 32, 1, "Trainium", 2, 32, 4, 15),
		neuron("trn1.32xlarge", 128, 512, 16, "Trainium", 2, 32, 8, 50),
		{Name: "m5.xlarge", VCPU: 4, MemoryMiB: 16 * gib, Arch: "x86_64", MaxENIs: 4, IPv4PerENI: 15},
	}
}
