package aws

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	astypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// explicitGroup is one --nodes=<min>:<max>:<asg-name>.
type explicitGroup struct {
	Name     string
	Min, Max int
}

// tagDiscoverer is one --node-group-auto-discovery=asg:tag=<k>[=<v>],...:
// the groups carrying every tag (with that value, where one is given).
type tagDiscoverer struct {
	Tags map[string]string // value "" = any value
}

// parseNodeGroups reads the --nodes values.
func parseNodeGroups(specs []string) ([]explicitGroup, error) {
	var out []explicitGroup
	seen := map[string]bool{}
	for _, s := range specs {
		spec, err := config.ParseNodeGroupSpec(s)
		if err != nil {
			return nil, fmt.Errorf("--nodes: %w", err)
		}
		if seen[spec.Name] {
			return nil, fmt.Errorf("--nodes: Auto Scaling group %q is given twice", spec.Name)
		}
		seen[spec.Name] = true
		out = append(out, explicitGroup{Name: spec.Name, Min: spec.Min, Max: spec.Max})
	}
	return out, nil
}

// parseDiscoverers reads the --node-group-auto-discovery values; every one
// must be asg:tag=...
func parseDiscoverers(specs []string) ([]tagDiscoverer, error) {
	var out []tagDiscoverer
	for _, s := range specs {
		d, err := parseDiscoverer(s)
		if err != nil {
			return nil, fmt.Errorf("--node-group-auto-discovery %q: %w", s, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseDiscoverer(s string) (tagDiscoverer, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || kind != "asg" {
		return tagDiscoverer{}, fmt.Errorf("the aws provider discovers with asg:tag=<key>[=<value>],... only")
	}
	what, list, ok := strings.Cut(rest, "=")
	if !ok || what != "tag" {
		return tagDiscoverer{}, fmt.Errorf("want asg:tag=<key>[=<value>],..., got %q", rest)
	}
	d := tagDiscoverer{Tags: map[string]string{}}
	for _, item := range strings.Split(list, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(item), "=")
		if k == "" {
			return tagDiscoverer{}, fmt.Errorf("an empty tag key in %q", list)
		}
		if _, dup := d.Tags[k]; dup {
			return tagDiscoverer{}, fmt.Errorf("tag key %q is given twice", k)
		}
		d.Tags[k] = v
	}
	return d, nil
}

// filters are the DescribeAutoScalingGroups filters of the discoverer: one
// per tag (tag-key for a key alone, tag:<key> for key=value), all of which
// must match.
func (d tagDiscoverer) filters() []astypes.Filter {
	keys := make([]string, 0, len(d.Tags))
	for k := range d.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]astypes.Filter, 0, len(keys))
	for _, k := range keys {
		if v := d.Tags[k]; v != "" {
			out = append(out, astypes.Filter{Name: aws.String("tag:" + k), Values: []string{v}})
		} else {
			out = append(out, astypes.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		}
	}
	return out
}

// matches checks a group's tags against the discoverer (the answer of the
// filtered call is checked again: a group is never adopted on a server's
// loose reading of the filters).
func (d tagDiscoverer) matches(tags map[string]string) bool {
	for k, v := range d.Tags {
		got, ok := tags[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}
