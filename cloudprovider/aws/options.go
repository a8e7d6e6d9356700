package aws

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// Tag prefixes of the per-group options: OptionTagPrefix is upstream's key,
// OptionTagAliasPrefix the one this autoscaler read first, still read.
// When both set the same option, OptionTagPrefix wins.
const (
	OptionTagPrefix      = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/"
	OptionTagAliasPrefix = "k8s.io/cluster-autoscaler/autoscaling-options/"
)

// Option names (upstream's; matched without regard to case).
const (
	optScaleDownUtilization    = "scaledownutilizationthreshold"
	optScaleDownGPUUtilization = "scaledowngpuutilizationthreshold"
	optScaleDownUnneededTime   = "scaledownunneededtime"
	optScaleDownUnreadyTime    = "scaledownunreadytime"
	optIgnoreDaemonSets        = "ignoredaemonsetsutilization"
	optMaxNodeProvisionTime    = "maxnodeprovisiontime"
	optMaxNodeStartupTime      = "maxnodestartuptime"
	// Ours (the disruption engine): the group's lifetime and budget.
	optMaxNodeLifetime  = "maxnodelifetime"
	optDisruptionBudget = "disruptionbudget"
)

// optionTag is one option tag: the option's name, the tag's key and value.
type optionTag struct {
	opt, key, value string
}

// optionTags picks the option tags out of a group's tags, one per option
// (by its lower-case name): the tag under upstream's prefix where there is
// one, else the alias; of two spellings under one prefix, the first key.
func optionTags(tags map[string]string) []optionTag {
	type pick struct {
		optionTag
		upstream bool
	}
	byOpt := map[string]pick{}
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var p pick
		switch {
		case strings.HasPrefix(k, OptionTagPrefix):
			p = pick{optionTag{opt: strings.TrimPrefix(k, OptionTagPrefix)}, true}
		case strings.HasPrefix(k, OptionTagAliasPrefix):
			p = pick{optionTag{opt: strings.TrimPrefix(k, OptionTagAliasPrefix)}, false}
		default:
			continue
		}
		p.opt, p.key, p.value = strings.ToLower(p.opt), k, strings.TrimSpace(tags[k])
		if had, ok := byOpt[p.opt]; p.opt == "" || (ok && (had.upstream || !p.upstream)) {
			continue
		}
		byOpt[p.opt] = p
	}
	out := make([]optionTag, 0, len(byOpt))
	for _, p := range byOpt {
		out = append(out, p.optionTag)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].opt < out[j].opt })
	return out
}

// parseOptions applies the option tags to defaults; it returns nil when no
// option tag is set, and an error naming a malformed tag.
func parseOptions(tags map[string]string, defaults config.NodeGroupAutoscalingOptions) (*config.NodeGroupAutoscalingOptions, error) {
	o := defaults
	set := false
	for _, t := range optionTags(tags) {
		v := t.value
		var err error
		switch t.opt {
		case optScaleDownUtilization:
			o.ScaleDownUtilizationThreshold, err = parseRatio(v)
		case optScaleDownGPUUtilization:
			o.ScaleDownGPUUtilizationThreshold, err = parseRatio(v)
		case optScaleDownUnneededTime:
			o.ScaleDownUnneededTime, err = parseDuration(v)
		case optScaleDownUnreadyTime:
			o.ScaleDownUnreadyTime, err = parseDuration(v)
		case optMaxNodeProvisionTime:
			o.MaxNodeProvisionTime, err = parseDuration(v)
		case optMaxNodeStartupTime:
			o.MaxNodeStartupTime, err = parseDuration(v)
		case optIgnoreDaemonSets:
			o.IgnoreDaemonSetsUtilization, err = strconv.ParseBool(v)
		case optMaxNodeLifetime:
			o.MaxNodeLifetime, err = parseDuration(v)
		case optDisruptionBudget:
			// Checked by the disruption engine, which logs and ignores
			// a budget that does not parse.
			o.DisruptionBudget = v
		default:
			continue // an option of another version: ignored
		}
		if err != nil {
			return nil, fmt.Errorf("tag %q: value %q: %w", t.key, v, err)
		}
		set = true
	}
	if !set {
		return nil, nil
	}
	return &o, nil
}

func parseRatio(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("not a number")
	}
	if !(f >= 0 && f <= 1) {
		return 0, fmt.Errorf("%v is outside 0..1", f)
	}
	return f, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("not a duration")
	}
	if d < 0 {
		return 0, fmt.Errorf("negative duration")
	}
	return d, nil
}
