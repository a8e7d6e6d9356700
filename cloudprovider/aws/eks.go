package aws

import (
	"context"
	"errors"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

// EKSAPI is what the provider calls of the EKS client.
type EKSAPI interface {
	DescribeNodegroup(ctx context.Context, in *eks.DescribeNodegroupInput, opts ...func(*eks.Options)) (*eks.DescribeNodegroupOutput, error)
}

// Tags EKS puts on the Auto Scaling group of a managed node group, and the
// labels EKS puts on its nodes.
const (
	EKSNodegroupTag      = "eks:nodegroup-name"
	EKSClusterTag        = "eks:cluster-name"
	EKSNodegroupLabel    = "eks.amazonaws.com/nodegroup"
	EKSCapacityTypeLabel = "eks.amazonaws.com/capacityType"
)

// How long what DescribeNodegroup said (or that it failed) is kept. A
// node group's labels and taints change rarely: managedTTL (plus a
// per-node-group jitter of up to managedJitter, so that many node groups
// are not all read in one loop) as upstream does; a failed call is tried
// again after managedRetry, one IAM refused after managedRefusedRetry.
const (
	managedTTL          = 6 * time.Minute
	managedJitter       = time.Minute
	managedRetry        = time.Minute
	managedRefusedRetry = 10 * time.Minute
)

// WithEKS makes the provider read the labels and taints of EKS managed
// node groups through c (Build passes the SDK's EKS client). Without it
// the template of a managed node group's Auto Scaling group has only
// eks.amazonaws.com/nodegroup, from the group's eks:nodegroup-name tag.
func WithEKS(c EKSAPI) Option {
	return func(p *Provider) {
		if c != nil {
			p.eks = &managedCache{client: c, entries: map[string]*managedEntry{}}
		}
	}
}

// newEKSClient builds the SDK's EKS client from the provider's config
// (AWS_ENDPOINT_URL_EKS and the shared config's endpoints apply).
func newEKSClient(cfg aws.Config, cc cloudConfig) EKSAPI {
	if o, ok := cc.override("eks", cfg.Region); ok {
		return eks.NewFromConfig(cfg, func(opts *eks.Options) {
			opts.BaseEndpoint, opts.Region = aws.String(o.URL), o.SigningRegion
		})
	}
	return eks.NewFromConfig(cfg)
}

// managedSpec is what a managed node group adds to a template.
type managedSpec struct {
	Labels map[string]string
	Taints []apiv1.Taint
}

// managedCache keeps DescribeNodegroup's answers by "<cluster>/<node group>".
type managedCache struct {
	client EKSAPI

	mu      sync.Mutex
	entries map[string]*managedEntry
	// refusedLogged: an IAM refusal was logged at the default level once;
	// later ones are logged at V(2) (the permission is either granted or
	// not, and the log should say so once, not every few minutes).
	refusedLogged bool
}

type managedEntry struct {
	spec  managedSpec // what DescribeNodegroup said, when ok
	ok    bool
	until time.Time
}

// managedNodegroup returns what the EKS managed node group behind a group
// (named by its eks:nodegroup-name and eks:cluster-name tags) adds to its
// template: eks.amazonaws.com/nodegroup from the tag, and, as
// DescribeNodegroup says, eks.amazonaws.com/capacityType, the node group's
// labels and taints. A failed or refused call is logged and leaves only
// the label from the tag; it is tried again later. ok is false for a group
// of no managed node group.
func (p *Provider) managedNodegroup(ctx context.Context, tags map[string]string) (spec managedSpec, ok bool) {
	name, cluster := tags[EKSNodegroupTag], tags[EKSClusterTag]
	if name == "" {
		return managedSpec{}, false
	}
	base := managedSpec{Labels: map[string]string{}}
	if len(validation.IsValidLabelValue(name)) == 0 {
		base.Labels[EKSNodegroupLabel] = name
	}
	if cluster == "" || p.eks == nil {
		return base, true
	}
	c := p.eks
	key := cluster + "/" + name
	now := p.clock.Now()
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e == nil || !now.Before(e.until) {
		e = c.read(ctx, cluster, name, now)
		c.mu.Lock()
		c.entries[key] = e
		c.mu.Unlock()
	}
	if !e.ok {
		return base, true
	}
	out := managedSpec{Labels: map[string]string{}, Taints: append([]apiv1.Taint(nil), e.spec.Taints...)}
	for k, v := range base.Labels {
		out.Labels[k] = v
	}
	for k, v := range e.spec.Labels {
		out.Labels[k] = v
	}
	return out, true
}

// read calls DescribeNodegroup once and makes the cache entry of its answer.
func (c *managedCache) read(ctx context.Context, cluster, name string, now time.Time) *managedEntry {
	log := klog.FromContext(ctx).WithValues("cluster", cluster, "eksNodegroup", name)
	out, err := c.client.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String(cluster), NodegroupName: aws.String(name)})
	if err == nil && out.Nodegroup == nil {
		err = errors.New("the answer has no nodegroup")
	}
	if err != nil {
		err = callError("describing EKS managed node group "+cluster+"/"+name, err, true)
		var nf *ekstypes.ResourceNotFoundException
		switch {
		case ctx.Err() != nil:
			return &managedEntry{until: now} // the caller gave up: nothing learnt, ask again next time
		case isAccessDenied(err):
			c.mu.Lock()
			first := !c.refusedLogged
			c.refusedLogged = true
			c.mu.Unlock()
			msg := "DescribeNodegroup refused by the IAM policy: templates of managed node groups lack their labels and taints; " +
				"add eks:DescribeNodegroup"
			if first {
				log.Info(msg, "retryIn", managedRefusedRetry, "err", err)
			} else {
				log.V(2).Info(msg, "retryIn", managedRefusedRetry, "err", err)
			}
			return &managedEntry{until: now.Add(managedRefusedRetry)}
		case errors.As(err, &nf):
			log.Info("The eks: tags of an Auto Scaling group name no managed node group EKS knows; its template has no labels or taints from EKS",
				"retryIn", managedTTL, "err", err)
			return &managedEntry{until: now.Add(managedTTL)}
		default:
			log.Info("Reading an EKS managed node group failed; its template has no labels or taints from EKS until it succeeds",
				"retryIn", managedRetry, "err", err)
			return &managedEntry{until: now.Add(managedRetry)}
		}
	}
	spec := managedFromEKS(log, out.Nodegroup)
	log.V(4).Info("Read an EKS managed node group", "labels", spec.Labels, "taints", spec.Taints)
	return &managedEntry{spec: spec, ok: true, until: now.Add(managedTTL + jitter(cluster+"/"+name, managedJitter))}
}

// managedFromEKS reads the labels and taints of a node group; an entry
// that is no valid label or taint is left out and logged.
func managedFromEKS(log klog.Logger, ng *ekstypes.Nodegroup) managedSpec {
	spec := managedSpec{Labels: map[string]string{}}
	if ct := string(ng.CapacityType); ct != "" {
		if errs := validation.IsValidLabelValue(ct); len(errs) == 0 {
			spec.Labels[EKSCapacityTypeLabel] = ct
		} else {
			log.Info("Ignoring the managed node group's capacity type: not a label value", "capacityType", ct, "why", strings.Join(errs, "; "))
		}
	}
	keys := make([]string, 0, len(ng.Labels))
	for k := range ng.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := ng.Labels[k]
		errs := validation.IsQualifiedName(k)
		if len(errs) == 0 {
			errs = validation.IsValidLabelValue(v)
		}
		if len(errs) > 0 {
			log.Info("Ignoring a label of the managed node group", "key", k, "value", v, "why", strings.Join(errs, "; "))
			continue
		}
		spec.Labels[k] = v
	}
	for _, t := range ng.Taints {
		taint, err := taintFromEKS(t)
		if err != nil {
			log.Info("Ignoring a taint of the managed node group", "key", aws.ToString(t.Key), "value", aws.ToString(t.Value),
				"effect", t.Effect, "why", err.Error())
			continue
		}
		spec.Taints = append(spec.Taints, taint)
	}
	return spec
}

// eksEffects maps the EKS API's taint effects to Kubernetes'.
var eksEffects = map[ekstypes.TaintEffect]apiv1.TaintEffect{
	ekstypes.TaintEffectNoSchedule:       apiv1.TaintEffectNoSchedule,
	ekstypes.TaintEffectNoExecute:        apiv1.TaintEffectNoExecute,
	ekstypes.TaintEffectPreferNoSchedule: apiv1.TaintEffectPreferNoSchedule,
}

func taintFromEKS(t ekstypes.Taint) (apiv1.Taint, error) {
	key, value := aws.ToString(t.Key), aws.ToString(t.Value)
	if key == "" {
		return apiv1.Taint{}, errors.New("no key")
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return apiv1.Taint{}, errors.New("key: " + strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return apiv1.Taint{}, errors.New("value: " + strings.Join(errs, "; "))
	}
	effect, ok := eksEffects[t.Effect]
	if !ok {
		return apiv1.Taint{}, errors.New("effect is not NO_SCHEDULE, NO_EXECUTE or PREFER_NO_SCHEDULE")
	}
	return apiv1.Taint{Key: key, Value: value, Effect: effect}, nil
}

// mergeTaints is the taints of a template: the node-template taint tags,
// then the managed node group's taints but those whose key and effect a tag
// already gives (a taint tag overrides the node group's taint of its key
// and effect; Kubernetes allows one taint per key and effect).
func mergeTaints(fromTags, fromEKS []apiv1.Taint) []apiv1.Taint {
	out := append([]apiv1.Taint(nil), fromTags...)
	for _, t := range fromEKS {
		dup := false
		for _, have := range out {
			dup = dup || (have.Key == t.Key && have.Effect == t.Effect)
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// jitter is a duration in [0, span) fixed by key.
func jitter(key string, span time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return time.Duration(h.Sum64() % uint64(span))
}
