package main

import (
	"strings"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// rangeValue is a pflag.Value for <min>:<max> flags.
type rangeValue struct{ r *config.Range }

func (v rangeValue) String() string { return v.r.String() }
func (v rangeValue) Type() string   { return "min:max" }
func (v rangeValue) Set(s string) error {
	r, err := config.ParseRange(s)
	if err != nil {
		return err
	}
	*v.r = r
	return nil
}

// gpuLimitsValue is a repeatable pflag.Value for --gpu-total.
type gpuLimitsValue struct{ l *[]config.GPULimit }

func (v gpuLimitsValue) String() string {
	parts := make([]string, 0, len(*v.l))
	for _, g := range *v.l {
		parts = append(parts, g.Type+":"+config.Range{Min: g.Min, Max: g.Max}.String())
	}
	return "[" + strings.Join(parts, ",") + "]"
}
func (v gpuLimitsValue) Type() string { return "gpu_type:min:max" }

// Set adds a limit; a type given again takes the new limit, as upstream's
// limits end up (its per-type map keeps the last), so scale-up and
// scale-down never read different limits of one type.
func (v gpuLimitsValue) Set(s string) error {
	g, err := config.ParseGPULimit(s)
	if err != nil {
		return err
	}
	for i := range *v.l {
		if (*v.l)[i].Type == g.Type {
			(*v.l)[i] = g
			return nil
		}
	}
	*v.l = append(*v.l, g)
	return nil
}

// commaListValue is a comma-separated list that replaces its default on Set.
type commaListValue struct{ l *[]string }

func (v commaListValue) String() string { return strings.Join(*v.l, ",") }
func (v commaListValue) Type() string   { return "names" }
func (v commaListValue) Set(s string) error {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	*v.l = out
	return nil
}
