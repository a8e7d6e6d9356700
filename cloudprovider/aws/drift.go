package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// An instance is drifted when its Auto Scaling group would launch it
// differently now, by what DescribeAutoScalingGroups says of both (the
// group's description kept by cache.go; no call of its own):
//
//   - it was launched from a launch configuration other than the group's,
//     or from a launch template while the group names a configuration, or
//     the other way round;
//   - it was launched from another launch template (by ID, else name) than
//     the group's (or, under a mixed-instances policy, than the override's
//     own template it was launched with);
//   - it was launched from another version of the template than the one
//     the group names: a number, or $Latest / $Default resolved to numbers
//     by DescribeLaunchTemplates (LatestVersionNumber, DefaultVersionNumber);
//   - under a mixed-instances policy, its instance type is among neither
//     the overrides' instance types nor the types of their requirements.
//
// The version numbers of every $Latest / $Default template of the groups
// are read in one DescribeLaunchTemplates call (per 100 templates) when a
// Drifted needs one and the last read is launchTTL old, and kept for
// launchTTL. A kept number can be older than an instance, launched since
// from a version created since: an instance found drifted by a number read
// before the group's description first listed it is checked again against
// a fresh read. When IAM refuses DescribeLaunchTemplates (upstream's policy
// lacks it), the numbers are read per template with
// DescribeLaunchTemplateVersions ($Latest and $Default in one call), which
// upstream's policy has. Whatever cannot be told (an instance the group
// does not list, a version AWS does not report as a number, a template
// that cannot be read) is not drifted, with an error.

// describeTemplatesBatch is how many launch templates one
// DescribeLaunchTemplates call names.
const describeTemplatesBatch = 100

// describeTemplatesRefusedRetry is how long DescribeLaunchTemplates is not
// called again after IAM refused it.
const describeTemplatesRefusedRetry = 10 * time.Minute

var _ cloudprovider.DriftDetector = (*NodeGroup)(nil)

// templateVersions are the version numbers $Latest and $Default stand for,
// as read at at by the read numbered seq (or the error of that read).
type templateVersions struct {
	latest, def int64
	at          time.Time
	seq         uint64
	err         error
}

// driftCache keeps the templates' version numbers and when each instance
// was first listed to Drifted (by the number of the read of the
// description that listed it: reads are numbered in the order they start,
// group descriptions and version numbers alike).
type driftCache struct {
	readMu sync.Mutex // one read of the version numbers at a time

	mu           sync.Mutex
	versions     map[string]templateVersions // by templateKey
	firstListed  map[string]uint64           // instance id -> number of a read listing it
	refusedUntil time.Time
}

func newDriftCache() *driftCache {
	return &driftCache{versions: map[string]templateVersions{}, firstListed: map[string]uint64{}}
}

// templateKey names a template in the cache: by ID, else by name.
func templateKey(r launchTemplateRef) string {
	if r.ID != "" {
		return "id:" + r.ID
	}
	return "name:" + r.Name
}

// sameTemplate reports whether a and b name one template, and whether that
// can be told (by IDs, else by names).
func sameTemplate(a, b launchTemplateRef) (same, known bool) {
	switch {
	case a.ID != "" && b.ID != "":
		return a.ID == b.ID, true
	case a.Name != "" && b.Name != "":
		return a.Name == b.Name, true
	}
	return false, false
}

// Drifted implements cloudprovider.DriftDetector (see the comment above).
func (g *NodeGroup) Drifted(ctx context.Context, node *apiv1.Node) (bool, string, error) {
	id, ok := instanceIDOf(node)
	if !ok || isPlaceholder(id) {
		return false, "", fmt.Errorf("node %q (provider id %q) is not a launched AWS instance", node.Name, node.Spec.ProviderID)
	}
	in, ok := g.desc.findInstance(id)
	if !ok {
		return false, "", fmt.Errorf("instance %s is not listed by Auto Scaling group %q", id, g.Id())
	}
	firstListed := g.p.drift.noteListed(id, g.seq)
	why, err := g.driftOf(ctx, in, 0)
	if err != nil || why == "" {
		return false, "", err
	}
	if g.p.drift.readBefore(g.desc, firstListed) {
		// A kept version number may be older than the instance: check
		// again with numbers read after the instance was listed.
		if why, err = g.driftOf(ctx, in, firstListed); err != nil || why == "" {
			return false, "", err
		}
	}
	return true, why, nil
}

// driftOf says what differs between the instance and what the group
// launches now ("" when nothing does), with version numbers of $Latest /
// $Default read after the read numbered after.
func (g *NodeGroup) driftOf(ctx context.Context, in instanceDesc, after uint64) (string, error) {
	d := &g.desc
	var why []string
	switch {
	case d.LaunchTemplate != nil:
		w, err := g.templateDrift(ctx, in, after)
		if err != nil {
			return "", err
		}
		if w != "" {
			why = append(why, w)
		}
	case d.LaunchConfiguration != "":
		switch {
		case in.LaunchConfiguration == d.LaunchConfiguration:
		case in.LaunchConfiguration != "":
			why = append(why, fmt.Sprintf("launch configuration %s, now %s", in.LaunchConfiguration, d.LaunchConfiguration))
		case in.LaunchTemplate != nil:
			why = append(why, fmt.Sprintf("launch template %s, now launch configuration %s", in.LaunchTemplate, d.LaunchConfiguration))
		default:
			return "", fmt.Errorf("AWS does not say what instance %s was launched with", in.ID)
		}
	default:
		return "", fmt.Errorf("the Auto Scaling group %q names neither a launch template nor a launch configuration", d.Name)
	}
	if d.Mixed {
		w, err := g.typeDrift(ctx, in)
		if err != nil {
			return "", err
		}
		if w != "" {
			why = append(why, w)
		}
	}
	return strings.Join(why, "; "), nil
}

// templateDrift compares the instance's launch template and version with
// the group's (or its override's).
func (g *NodeGroup) templateDrift(ctx context.Context, in instanceDesc, after uint64) (string, error) {
	d := &g.desc
	have := in.LaunchTemplate
	if have == nil {
		if in.LaunchConfiguration != "" {
			return fmt.Sprintf("launch configuration %s, now launch template %s", in.LaunchConfiguration, d.LaunchTemplate), nil
		}
		return "", fmt.Errorf("AWS does not say what instance %s was launched with", in.ID)
	}
	want := *d.LaunchTemplate
	for _, o := range d.OverrideTemplates {
		if same, _ := sameTemplate(*have, o); same {
			want = o
		}
	}
	same, known := sameTemplate(*have, want)
	if !known {
		return "", fmt.Errorf("instance %s: launch template %s cannot be compared with %s (one has an ID, the other a name)", in.ID, have, want)
	}
	if !same {
		return fmt.Sprintf("launch template %s, now %s", have, want), nil
	}
	n, err := strconv.ParseInt(have.Version, 10, 64)
	if err != nil {
		return "", fmt.Errorf("instance %s: AWS reports launch template version %q, not a number", in.ID, have.Version)
	}
	wantN, err := g.p.versionNumber(ctx, want, after)
	if err != nil {
		return "", err
	}
	if n == wantN {
		return "", nil
	}
	name := want.ID
	if name == "" {
		name = want.Name
	}
	if want.numbered() {
		return fmt.Sprintf("launch template %s version %d, now %d", name, n, wantN), nil
	}
	return fmt.Sprintf("launch template %s version %d, now %d (%s)", name, n, wantN, want.version()), nil
}

// typeDrift checks the instance type against a mixed-instances policy.
func (g *NodeGroup) typeDrift(ctx context.Context, in instanceDesc) (string, error) {
	d := &g.desc
	if in.Type == "" {
		return "", nil
	}
	var allowed []string
	allowed = append(allowed, d.MixedOverrides...)
	for _, o := range d.MixedRequirements {
		ref := d.LaunchTemplate
		if o.LaunchTemplate != nil {
			ref = o.LaunchTemplate
		}
		types, err := g.p.typesForRequirements(ctx, o.Requirements, g.p.groupArchitectures(ctx, d, ref))
		if err != nil {
			return "", fmt.Errorf("instance %s: the instance types of the requirements of Auto Scaling group %q: %w", in.ID, d.Name, err)
		}
		allowed = append(allowed, types...)
	}
	if len(allowed) == 0 || slices.Contains(allowed, in.Type) {
		return "", nil
	}
	if len(d.MixedRequirements) > 0 {
		return fmt.Sprintf("instance type %s, no longer one the mixed-instances policy launches", in.Type), nil
	}
	return fmt.Sprintf("instance type %s, no longer among the overrides %v", in.Type, d.MixedOverrides), nil
}

// noteListed records that the read numbered seq lists the instance and
// returns the first such read recorded.
func (c *driftCache) noteListed(id string, seq uint64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := c.firstListed[id]; ok && first <= seq {
		return first
	}
	c.firstListed[id] = seq
	return seq
}

// readBefore reports whether a version number the group's template
// resolves through was read before the instance was first listed.
func (c *driftCache) readBefore(d groupDesc, firstListed uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	refs := append([]launchTemplateRef(nil), d.OverrideTemplates...)
	if d.LaunchTemplate != nil {
		refs = append(refs, *d.LaunchTemplate)
	}
	for _, r := range refs {
		if e, ok := c.versions[templateKey(r)]; ok && !r.numbered() && e.seq < firstListed {
			return true
		}
	}
	return false
}

// versionNumber resolves a template reference to a version number: a
// number as it is, $Latest and $Default by the kept numbers (read again
// when launchTTL old, or when read before the read numbered after).
func (p *Provider) versionNumber(ctx context.Context, ref launchTemplateRef, after uint64) (int64, error) {
	if ref.numbered() {
		n, err := strconv.ParseInt(ref.version(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("launch template %s: version %q is not $Default, $Latest or a number", ref, ref.version())
		}
		return n, nil
	}
	key := templateKey(ref)
	c := p.drift
	lookup := func() (templateVersions, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		e, ok := c.versions[key]
		return e, ok && p.clock.Since(e.at) < launchTTL && e.seq > after
	}
	e, ok := lookup()
	if !ok {
		c.readMu.Lock()
		if e, ok = lookup(); !ok {
			p.readVersions(ctx, ref)
			e, ok = lookup()
		}
		c.readMu.Unlock()
	}
	switch {
	case !ok:
		return 0, fmt.Errorf("launch template %s: version numbers not read", ref)
	case e.err != nil:
		return 0, e.err
	case ref.version() == "$Latest":
		return e.latest, nil
	default:
		return e.def, nil
	}
}

// readVersions reads the version numbers of want and of every other
// $Latest / $Default template of the groups, and keeps them (or the error
// for want). Called under readMu.
func (p *Provider) readVersions(ctx context.Context, want launchTemplateRef) {
	now, seq := p.clock.Now(), p.seq.Add(1)
	c := p.drift
	listed := p.current().byInstance
	c.mu.Lock()
	refused := now.Before(c.refusedUntil)
	for id := range c.firstListed {
		if listed[id] == nil {
			delete(c.firstListed, id) // gone
		}
	}
	c.mu.Unlock()
	keep := func(key string, v templateVersions) {
		v.at, v.seq = now, seq
		c.mu.Lock()
		c.versions[key] = v
		c.mu.Unlock()
	}
	if !refused {
		ids, names := p.symbolicTemplates(want)
		err := p.describeTemplates(ctx, ids, names, keep)
		switch {
		case err == nil:
			c.mu.Lock()
			_, ok := c.versions[templateKey(want)]
			c.mu.Unlock()
			if ok {
				return
			}
			// Not among the answer: read alone below, whose error is kept.
		case isAccessDenied(err):
			c.mu.Lock()
			c.refusedUntil = now.Add(describeTemplatesRefusedRetry)
			c.mu.Unlock()
			klog.FromContext(ctx).Info("DescribeLaunchTemplates refused by the IAM policy: the version numbers of $Latest and $Default "+
				"are read per template with DescribeLaunchTemplateVersions; add ec2:DescribeLaunchTemplates for one call for all",
				"retryIn", describeTemplatesRefusedRetry, "err", err)
		case len(ids)+len(names) > 1:
			// One template of the batch may be gone: read want alone.
			ids, names = nil, nil
			if want.ID != "" {
				ids = []string{want.ID}
			} else {
				names = []string{want.Name}
			}
			if err = p.describeTemplates(ctx, ids, names, keep); err == nil {
				return
			}
			fallthrough
		default:
			keep(templateKey(want), templateVersions{err: err})
			return
		}
	}
	v, err := p.readVersionsOf(ctx, want)
	v.err = err
	keep(templateKey(want), v)
}

// symbolicTemplates lists the templates of the groups named with $Latest or
// $Default (want first): by ID where the group gives one, else by name.
func (p *Provider) symbolicTemplates(want launchTemplateRef) (ids, names []string) {
	seen := map[string]bool{}
	add := func(r launchTemplateRef) {
		if r.numbered() || seen[templateKey(r)] {
			return
		}
		seen[templateKey(r)] = true
		if r.ID != "" {
			ids = append(ids, r.ID)
		} else if r.Name != "" {
			names = append(names, r.Name)
		}
	}
	add(want)
	s := p.current()
	for _, n := range s.order {
		d := s.groups[n].desc
		if d.LaunchTemplate != nil {
			add(*d.LaunchTemplate)
		}
		for _, o := range d.OverrideTemplates {
			add(o)
		}
	}
	return ids, names
}

// describeTemplates reads the named templates with DescribeLaunchTemplates,
// describeTemplatesBatch a call, and keeps each one's numbers.
func (p *Provider) describeTemplates(ctx context.Context, ids, names []string, keep func(string, templateVersions)) error {
	for _, list := range []struct {
		names []string
		byID  bool
	}{{ids, true}, {names, false}} {
		for start := 0; start < len(list.names); start += describeTemplatesBatch {
			batch := list.names[start:min(start+describeTemplatesBatch, len(list.names))]
			in := &ec2.DescribeLaunchTemplatesInput{}
			if list.byID {
				in.LaunchTemplateIds = batch
			} else {
				in.LaunchTemplateNames = batch
			}
			out, err := p.ec2.DescribeLaunchTemplates(ctx, in)
			if err != nil {
				return callError(fmt.Sprintf("describing %d launch templates", len(batch)), err, true)
			}
			for _, lt := range out.LaunchTemplates {
				if deref(lt.LatestVersionNumber) < 1 || deref(lt.DefaultVersionNumber) < 1 {
					continue // not kept: the caller reports it
				}
				v := templateVersions{latest: *lt.LatestVersionNumber, def: *lt.DefaultVersionNumber}
				if id := deref(lt.LaunchTemplateId); id != "" {
					keep("id:"+id, v)
				}
				if n := deref(lt.LaunchTemplateName); n != "" {
					keep("name:"+n, v)
				}
			}
		}
	}
	return nil
}

// readVersionsOf reads the numbers of one template with
// DescribeLaunchTemplateVersions ($Latest and $Default in one call).
func (p *Provider) readVersionsOf(ctx context.Context, ref launchTemplateRef) (templateVersions, error) {
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{"$Latest", "$Default"}}
	if ref.ID != "" {
		in.LaunchTemplateId = aws.String(ref.ID)
	} else {
		in.LaunchTemplateName = aws.String(ref.Name)
	}
	out, err := p.ec2.DescribeLaunchTemplateVersions(ctx, in)
	if err != nil {
		return templateVersions{}, callError(fmt.Sprintf("describing the versions of launch template %s", ref), err, true)
	}
	var v templateVersions
	for _, lv := range out.LaunchTemplateVersions {
		n := deref(lv.VersionNumber)
		v.latest = max(v.latest, n)
		if deref(lv.DefaultVersion) {
			v.def = n
		}
	}
	if v.latest == 0 || v.def == 0 {
		return templateVersions{}, errors.New("launch template " + ref.String() + ": AWS does not say its latest and default versions")
	}
	return v, nil
}
