package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseRange parses "<min>:<max>" with 0 <= min <= max.
func ParseRange(s string) (Range, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 2 {
		return Range{}, fmt.Errorf("want <min>:<max>, got %q", s)
	}
	min, err := parseNonNegative(parts[0], "min")
	if err != nil {
		return Range{}, err
	}
	max, err := parseNonNegative(parts[1], "max")
	if err != nil {
		return Range{}, err
	}
	if max < min {
		return Range{}, fmt.Errorf("max %d is below min %d", max, min)
	}
	return Range{Min: min, Max: max}, nil
}

// String formats r as the flag takes it.
func (r Range) String() string { return fmt.Sprintf("%d:%d", r.Min, r.Max) }

// ParseGPULimit parses "<gpu_type>:<min>:<max>".
func ParseGPULimit(s string) (GPULimit, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return GPULimit{}, fmt.Errorf("want <gpu_type>:<min>:<max>, got %q", s)
	}
	if parts[0] == "" {
		return GPULimit{}, fmt.Errorf("empty gpu type in %q", s)
	}
	r, err := ParseRange(parts[1] + ":" + parts[2])
	if err != nil {
		return GPULimit{}, fmt.Errorf("%q: %w", s, err)
	}
	return GPULimit{Type: parts[0], Min: r.Min, Max: r.Max}, nil
}

// NodeGroupSpec is one parsed --nodes value.
type NodeGroupSpec struct {
	Min  int
	Max  int
	Name string // everything after the second colon; providers may give it structure
}

// ParseNodeGroupSpec parses "<min>:<max>:<name>" with 0 <= min <= max and a non-empty name.
func ParseNodeGroupSpec(s string) (NodeGroupSpec, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 || parts[2] == "" {
		return NodeGroupSpec{}, fmt.Errorf("want <min>:<max>:<name>, got %q", s)
	}
	min, err := parseNonNegative(parts[0], "min")
	if err != nil {
		return NodeGroupSpec{}, fmt.Errorf("%q: %w", s, err)
	}
	max, err := parseNonNegative(parts[1], "max")
	if err != nil {
		return NodeGroupSpec{}, fmt.Errorf("%q: %w", s, err)
	}
	if max < min {
		return NodeGroupSpec{}, fmt.Errorf("%q: max %d is below min %d", s, max, min)
	}
	if max > 1<<31-1 {
		return NodeGroupSpec{}, fmt.Errorf("%q: max %d is too large", s, max)
	}
	return NodeGroupSpec{Min: int(min), Max: int(max), Name: parts[2]}, nil
}

func parseNonNegative(s, what string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a whole number", what, s)
	}
	if v < 0 {
		return 0, fmt.Errorf("%s %d is negative", what, v)
	}
	return v, nil
}
