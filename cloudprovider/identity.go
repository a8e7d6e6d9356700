package cloudprovider

import (
	"context"
	"errors"
	"sort"
	"strings"

	apiv1 "k8s.io/api/core/v1"
)

// InstanceMatcher is implemented by a provider that matches a Node to the
// instance it is by more than its spec.providerID (another spelling of the
// ID, a Machine's nodeRef): the matching its own DeleteNodes and
// NodeGroupForNode use. Identify asks it first; a provider without it is
// matched by provider ID alone.
type InstanceMatcher interface {
	// InstanceOfNode returns the Id, exactly as the node's group lists it
	// in Nodes, of the instance that node is. found is false when the
	// provider knows no instance of the node; err when it cannot tell.
	InstanceOfNode(ctx context.Context, node *apiv1.Node) (id string, found bool, err error)
}

// Match says how surely a Node is a listed instance.
type Match int

const (
	// NoMatch: no Node is, or may be, the instance.
	NoMatch Match = iota
	// MaybeMatch: a Node may be the instance (it looks like it, or its
	// provider could not tell which instance it is). A destroying path
	// treats it as the instance's Node: it keeps the instance.
	MaybeMatch
	// SureMatch: the provider's own matching names the Node's instance.
	SureMatch
)

func (m Match) String() string {
	switch m {
	case SureMatch:
		return "sure"
	case MaybeMatch:
		return "maybe"
	}
	return "none"
}

// Identities is one matching of Nodes to the instances node groups list:
// the one answer every path that destroys an instance, or concludes that
// one is gone, asks. Unsure means keep: a Node that may be an instance
// makes the instance count as having a Node.
type Identities struct {
	sure      map[string]string   // listed instance id -> node name
	nodeID    map[string]string   // node name -> listed instance id (sure)
	maybe     map[string][]string // listed instance id -> node names that may be it
	unsure    []string            // nodes that may be any instance without a sure Node
	unsureIn  map[string][]string // group id -> its nodes whose instance the provider cannot name
	maybeOf   map[string]string   // node name -> the first instance it may be, or "an instance of <group>"
	groupOf   map[string]string   // listed instance id -> group id
	nodeNotes map[string]string   // node name -> why it is unsure
}

// Identify matches nodes to the instances in listed (group id -> the
// group's Nodes()) the way provider does, in this order: the provider's
// InstanceMatcher; the normalised provider ID (NormalizeProviderID) equal to
// exactly one listed instance's; then, for a Node still unmatched, what makes
// it a maybe: a provider ID equal but for case, the same last segment, a
// Node name equal to an instance's last segment, a group that the provider
// names for the node (NodeGroupForNode) without naming the instance, or a
// provider error (the Node may then be any instance).
func Identify(ctx context.Context, provider CloudProvider, nodes []*apiv1.Node, listed map[string][]Instance) *Identities {
	total := 0
	for _, instances := range listed {
		total += len(instances)
	}
	ids := &Identities{sure: make(map[string]string, len(nodes)), nodeID: make(map[string]string, len(nodes)),
		maybe: map[string][]string{}, unsureIn: map[string][]string{}, maybeOf: map[string]string{},
		groupOf: make(map[string]string, total), nodeNotes: map[string]string{}}
	byNorm := make(map[string][]string, total) // normalised id -> listed ids
	groups := make([]string, 0, len(listed))
	for g := range listed {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		for _, in := range listed[g] {
			if in.Id == "" {
				continue
			}
			ids.groupOf[in.Id] = g
			norm := NormalizeProviderID(in.Id)
			byNorm[norm] = append(byNorm[norm], in.Id)
		}
	}
	matcher, _ := provider.(InstanceMatcher)
	var rest []*apiv1.Node
	for _, n := range nodes {
		providerSaysNo := false
		if matcher != nil {
			id, found, err := matcher.InstanceOfNode(ctx, n)
			switch {
			case err != nil:
				ids.unsure = append(ids.unsure, n.Name)
				ids.nodeNotes[n.Name] = "its provider could not tell its instance: " + err.Error()
				continue
			case found && ids.groupOf[id] != "" && ids.sure[id] == "":
				ids.setSure(id, n.Name)
				continue
			case found && ids.groupOf[id] != "":
				ids.addMaybe(id, n.Name) // a second Node of one instance: neither is told apart
				continue
			case !found:
				providerSaysNo = true
			}
		}
		if n.Spec.ProviderID != "" {
			if c := byNorm[NormalizeProviderID(n.Spec.ProviderID)]; len(c) == 1 && !providerSaysNo && ids.sure[c[0]] == "" {
				ids.setSure(c[0], n.Name)
				continue
			}
		}
		rest = append(rest, n)
	}
	if len(rest) == 0 {
		return ids
	}
	byFold := map[string][]string{} // lower-cased normalised id -> listed ids
	bySeg := map[string][]string{}  // lower-cased last segment -> listed ids
	for norm, listedIDs := range byNorm {
		byFold[strings.ToLower(norm)] = append(byFold[strings.ToLower(norm)], listedIDs...)
		if seg := strings.ToLower(LastSegment(norm)); seg != "" {
			bySeg[seg] = append(bySeg[seg], listedIDs...)
		}
	}
	for _, n := range rest {
		ids.lookalike(ctx, provider, n, byFold, bySeg)
	}
	return ids
}

func (ids *Identities) setSure(id, node string) {
	ids.sure[id] = node
	ids.nodeID[node] = id
}

func (ids *Identities) addMaybe(id, node string) {
	ids.maybe[id] = append(ids.maybe[id], node)
	if ids.maybeOf[node] == "" {
		ids.maybeOf[node] = id
	}
}

// lookalike records what an unmatched node may be.
func (ids *Identities) lookalike(ctx context.Context, provider CloudProvider, n *apiv1.Node, byFold, bySeg map[string][]string) {
	var candidates []string
	if n.Spec.ProviderID != "" {
		norm := NormalizeProviderID(n.Spec.ProviderID)
		candidates = append(candidates, byFold[strings.ToLower(norm)]...)
		if seg := strings.ToLower(LastSegment(norm)); seg != "" {
			candidates = append(candidates, bySeg[seg]...)
		}
	}
	candidates = append(candidates, bySeg[strings.ToLower(n.Name)]...)
	found := false
	seen := map[string]bool{}
	for _, id := range candidates {
		if seen[id] || ids.sure[id] == n.Name {
			continue
		}
		seen[id] = true
		ids.addMaybe(id, n.Name)
		found = true
	}
	if found {
		return
	}
	g, err := provider.NodeGroupForNode(ctx, n)
	switch {
	case err != nil && !errors.Is(err, ErrNotImplemented):
		ids.unsure = append(ids.unsure, n.Name)
		ids.nodeNotes[n.Name] = "its node group could not be looked up: " + err.Error()
	case g != nil:
		ids.unsureIn[g.Id()] = append(ids.unsureIn[g.Id()], n.Name)
		ids.maybeOf[n.Name] = "an instance of " + g.Id()
		ids.nodeNotes[n.Name] = "its provider puts it in node group " + g.Id() + " without naming its instance"
	}
}

// NodeOf says which Node instance id (as its group lists it) is: the sure
// Node, or one that may be it. For a maybe, node is the first such Node.
func (ids *Identities) NodeOf(id string) (node string, m Match) {
	if n := ids.sure[id]; n != "" {
		return n, SureMatch
	}
	if ns := ids.maybe[id]; len(ns) > 0 {
		return ns[0], MaybeMatch
	}
	if ns := ids.unsureIn[ids.groupOf[id]]; len(ns) > 0 {
		return ns[0], MaybeMatch
	}
	if len(ids.unsure) > 0 {
		return ids.unsure[0], MaybeMatch
	}
	return "", NoMatch
}

// Registered reports whether instance id has a Node for sure.
func (ids *Identities) Registered(id string) bool { return ids.sure[id] != "" }

// InstanceOf returns the listed instance id that node is, for sure.
func (ids *Identities) InstanceOf(node string) (string, bool) {
	id, ok := ids.nodeID[node]
	return id, ok
}

// MayBeListed reports whether node is, or may be, an instance some group
// lists, and if so which (its sure instance, or the first it may be).
// A node the provider could not identify may be any instance.
func (ids *Identities) MayBeListed(node string) (string, Match) {
	if id, ok := ids.nodeID[node]; ok {
		return id, SureMatch
	}
	if id, ok := ids.maybeOf[node]; ok {
		return id, MaybeMatch
	}
	if ids.nodeNotes[node] != "" {
		return "", MaybeMatch
	}
	return "", NoMatch
}

// Why says why node is unsure ("" when it is not).
func (ids *Identities) Why(node string) string { return ids.nodeNotes[node] }

// NormalizeProviderID makes the usual spellings of one provider ID equal:
// surrounding blanks and trailing slashes go, the scheme is lower-cased,
// and the slashes after it and runs of slashes collapse, so that
// "aws:///zone/i-1" and "aws://zone/i-1" compare equal. Nothing else of
// the ID changes (IDs that differ in case stay different).
func NormalizeProviderID(id string) string {
	if normalized(id) {
		return id
	}
	id = strings.TrimSpace(id)
	scheme, rest, ok := strings.Cut(id, "://")
	if !ok {
		return strings.TrimRight(id, "/")
	}
	var b strings.Builder
	b.WriteString(strings.ToLower(scheme))
	b.WriteString("://")
	prevSlash := false
	for _, r := range strings.TrimLeft(rest, "/") {
		if r == '/' && prevSlash {
			continue
		}
		prevSlash = r == '/'
		b.WriteRune(r)
	}
	return strings.TrimRight(b.String(), "/")
}

// normalized reports, without allocating, whether NormalizeProviderID
// would return id unchanged.
func normalized(id string) bool {
	if id == "" || id[0] == ' ' || id[len(id)-1] == ' ' || id[len(id)-1] == '/' || strings.ContainsAny(id, "\t\n\r\v\f") {
		return id == ""
	}
	i := strings.Index(id, "://")
	if i < 0 {
		return true
	}
	for _, c := range id[:i] {
		if c >= 'A' && c <= 'Z' {
			return false
		}
	}
	rest := id[i+3:]
	return !strings.HasPrefix(rest, "/") && !strings.Contains(rest, "//")
}

// LastSegment is what follows the last slash of a provider ID (all of an
// ID without one), such as the instance name of "gce://p/zone/name".
func LastSegment(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		id = rest
	}
	return id[strings.LastIndex(id, "/")+1:]
}
