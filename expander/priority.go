package expander

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// The priority expander's ConfigMap and the reasons of its Warning events.
const (
	PriorityConfigMapName = "cluster-autoscaler-priority-expander"
	PriorityConfigMapKey  = "priorities"

	// ReasonPriorityConfigMapInvalid: the key is missing or its value is not a
	// YAML map of integer priorities to lists of valid regular expressions.
	ReasonPriorityConfigMapInvalid = "PriorityConfigMapInvalid"
	// ReasonPriorityConfigMapNotMatchedGroup: an option's node group matches
	// no expression, so the option is dropped.
	ReasonPriorityConfigMapNotMatchedGroup = "PriorityConfigMapNotMatchedGroup"
	// ReasonPriorityConfigMapNoGroupMatched: no option matches any expression,
	// so every option is kept.
	ReasonPriorityConfigMapNoGroupMatched = "PriorityConfigMapNoGroupMatched"
)

// priorityRule is one priority with its compiled expressions.
type priorityRule struct {
	priority int
	patterns []*regexp.Regexp
}

// priority keeps the options whose node group Id matches an expression of the
// highest priority that any option matches. Expressions are Go regular
// expressions matched anywhere in the Id (anchor them with ^ and $ for whole
// Ids). The ConfigMap is read through the lister on every call, so edits take
// effect at the next call; an unusable ConfigMap keeps every option.
type priority struct {
	configMaps corelisters.ConfigMapNamespaceLister
	recorder   record.EventRecorder
	namespace  string

	mu         sync.Mutex
	lastSource string // the value rules was parsed from
	lastRules  []priorityRule
}

var _ Filter = (*priority)(nil)

func newPriority(configMaps corelisters.ConfigMapNamespaceLister, recorder record.EventRecorder, namespace string) (*priority, error) {
	if configMaps == nil {
		return nil, fmt.Errorf("priority expander needs a ConfigMap lister for namespace %q", namespace)
	}
	return &priority{configMaps: configMaps, recorder: recorder, namespace: namespace}, nil
}

// BestOptions implements Filter.
func (p *priority) BestOptions(ctx context.Context, options []Option, _ map[string]*cloudprovider.NodeInfo) []Option {
	if len(options) == 0 {
		return options
	}
	logger := klog.FromContext(ctx)
	cm, err := p.configMaps.Get(PriorityConfigMapName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			logger.V(2).Info("Priority expander ConfigMap not found; keeping every option",
				"configMap", klog.KRef(p.namespace, PriorityConfigMapName))
		} else {
			logger.Error(err, "Priority expander could not read its ConfigMap; keeping every option",
				"configMap", klog.KRef(p.namespace, PriorityConfigMapName))
		}
		return options
	}
	rules, err := p.rules(cm)
	if err != nil {
		p.warn(ctx, 0, cm, ReasonPriorityConfigMapInvalid, "Priority expander ignores its ConfigMap: %v", err)
		return options
	}

	var best []Option
	bestPriority := 0
	for _, o := range options {
		prio, ok := matchPriority(rules, groupID(o))
		switch {
		case !ok:
			p.warn(ctx, 4, cm, ReasonPriorityConfigMapNotMatchedGroup,
				"Priority expander: node group %s matches no priority; it is not considered", groupID(o))
		case best == nil || prio > bestPriority:
			best, bestPriority = []Option{o}, prio
		case prio == bestPriority:
			best = append(best, o)
		}
		if ok {
			logger.V(4).Info("Expander scored option", "expander", "priority", "nodeGroup", groupID(o), "priority", prio)
		}
	}
	if best == nil {
		p.warn(ctx, 2, cm, ReasonPriorityConfigMapNoGroupMatched,
			"Priority expander: no node group of the %d options matches a priority; keeping them all", len(options))
		return options
	}
	return best
}

// matchPriority is the highest priority with an expression matching id.
func matchPriority(rules []priorityRule, id string) (int, bool) {
	for _, r := range rules { // sorted by descending priority
		for _, re := range r.patterns {
			if re.MatchString(id) {
				return r.priority, true
			}
		}
	}
	return 0, false
}

// rules parses the ConfigMap's priorities, reusing the last result while the
// value is unchanged.
func (p *priority) rules(cm *apiv1.ConfigMap) ([]priorityRule, error) {
	source, ok := cm.Data[PriorityConfigMapKey]
	if !ok {
		return nil, fmt.Errorf("key %q is missing", PriorityConfigMapKey)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.lastRules != nil && source == p.lastSource {
		return p.lastRules, nil
	}
	rules, err := parsePriorities(source)
	if err != nil {
		return nil, err
	}
	p.lastSource, p.lastRules = source, rules
	return rules, nil
}

// parsePriorities reads a YAML map of integer priority to a list of regular
// expressions, sorted by descending priority.
func parsePriorities(source string) ([]priorityRule, error) {
	var raw map[int][]string
	if err := yaml.Unmarshal([]byte(source), &raw); err != nil {
		return nil, fmt.Errorf("key %q is not a map of integer priorities to lists of expressions: %w", PriorityConfigMapKey, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("key %q defines no priority", PriorityConfigMapKey)
	}
	rules := make([]priorityRule, 0, len(raw))
	for _, prio := range slices.Sorted(maps.Keys(raw)) {
		r := priorityRule{priority: prio}
		for _, expr := range raw[prio] {
			re, err := regexp.Compile(expr)
			if err != nil {
				return nil, fmt.Errorf("priority %d: expression %q: %w", prio, expr, err)
			}
			r.patterns = append(r.patterns, re)
		}
		rules = append(rules, r)
	}
	slices.Reverse(rules)
	return rules, nil
}

// warn logs a problem with the ConfigMap at verbosity v and records it as a
// Warning event on it.
func (p *priority) warn(ctx context.Context, v int, cm *apiv1.ConfigMap, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	klog.FromContext(ctx).V(v).Info("Priority expander ConfigMap problem", "configMap", klog.KObj(cm), "reason", reason, "detail", msg)
	if p.recorder != nil {
		p.recorder.Event(cm, apiv1.EventTypeWarning, reason, msg)
	}
}
