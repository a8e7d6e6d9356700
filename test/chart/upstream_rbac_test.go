package chart_test

import (
	"fmt"
	"os"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// upstreamRBACFile holds upstream's chart's rules and this chart's
// differences from them, each with its reason.
const upstreamRBACFile = "testdata/upstream-rbac.yaml"

// upstreamRBAC is upstreamRBACFile decoded.
type upstreamRBAC struct {
	Upstream struct {
		ClusterRole []rbacv1.PolicyRule `json:"clusterRole"`
		Role        []rbacv1.PolicyRule `json:"role"`
	} `json:"upstream"`
	Cases []struct {
		Name          string              `json:"name"`
		Values        string              `json:"values"`
		ClusterRole   []rbacv1.PolicyRule `json:"clusterRole"`
		Role          []rbacv1.PolicyRule `json:"role"`
		NoClusterRole bool                `json:"noClusterRole"`
	} `json:"cases"`
	// KwokNodes is the YAML anchor of the kwok cases' rules.
	KwokNodes []rbacv1.PolicyRule `json:"kwokNodes"`
	Extras    []difference        `json:"extras"`
}

// difference is a rule of this chart that upstream's lacks, with the
// feature that needs it.
type difference struct {
	rbacv1.PolicyRule `json:",inline"`
	Scope             string `json:"scope"`
	Feature           string `json:"feature"`
}

// scoped is a permission granted cluster-wide or in the release namespace.
type scoped struct {
	scope string // "cluster" or "namespace"
	permission
}

func (s scoped) String() string { return s.scope + ": " + s.permission.String() }

// expand lists every permission rules grant in scope, one per verb, resource
// and resource name.
func expand(scope string, rules []rbacv1.PolicyRule) []scoped {
	var out []scoped
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, scoped{scope, permission{group: g, resource: res, verb: v, name: n}})
					}
				}
			}
		}
	}
	return out
}

// grants reports whether a chart with these rules allows p: a namespace
// permission is also granted by the ClusterRole.
func grants(clusterRole, role []rbacv1.PolicyRule, p scoped) bool {
	if p.scope == "namespace" && allows(role, p.permission) {
		return true
	}
	return allows(clusterRole, p.permission)
}

// listed returns the index of the difference that names p, or -1.
func listed(diffs []difference, p scoped) int {
	return slices.IndexFunc(diffs, func(d difference) bool {
		return d.Scope == p.scope && allows([]rbacv1.PolicyRule{d.PolicyRule}, p.permission)
	})
}

func loadUpstreamRBAC(t *testing.T) upstreamRBAC {
	t.Helper()
	b, err := os.ReadFile(upstreamRBACFile)
	if err != nil {
		t.Fatal(err)
	}
	var u upstreamRBAC
	if err := yaml.UnmarshalStrict(b, &u); err != nil {
		t.Fatalf("%s: %v", upstreamRBACFile, err)
	}
	for i, d := range u.Extras {
		if (d.Scope != "cluster" && d.Scope != "namespace") || d.Feature == "" {
			t.Fatalf("%s: extra %d (%v) needs scope cluster or namespace, and the feature that needs it",
				upstreamRBACFile, i, d.Resources)
		}
	}
	return u
}

// TestRBACMatchesUpstream renders this chart with the values of each case of
// upstreamRBACFile and compares its ClusterRole and Role with upstream's
// rules for the same values, permission by permission: every one of
// upstream's must be granted (RBAC reviewed for upstream's chart covers this
// one), and one this chart grants beyond upstream's must be listed as an
// extra, with the feature that needs it. A listed extra that no case shows
// any more is an error too, so the file stays true when either chart changes.
func TestRBACMatchesUpstream(t *testing.T) {
	u := loadUpstreamRBAC(t)
	usedExtras := make([]bool, len(u.Extras))
	for _, c := range u.Cases {
		t.Run(c.Name, func(t *testing.T) {
			upCluster := slices.Concat(u.Upstream.ClusterRole, c.ClusterRole)
			if c.NoClusterRole {
				upCluster = nil
			}
			upRole := slices.Concat(u.Upstream.Role, c.Role)
			m := render(t, release, namespace, c.Values)
			var ourCluster, ourRole []rbacv1.PolicyRule
			if crs := m.all("ClusterRole"); len(crs) > 0 {
				cr := &rbacv1.ClusterRole{}
				m.one(t, "ClusterRole", cr)
				ourCluster = cr.Rules
			}
			r := &rbacv1.Role{}
			m.one(t, "Role", r)
			ourRole = r.Rules
			if (ourCluster == nil) != c.NoClusterRole {
				t.Errorf("ClusterRole rendered: %v, upstream's: %v", ourCluster != nil, !c.NoClusterRole)
			}

			for _, p := range slices.Concat(expand("cluster", upCluster), expand("namespace", upRole)) {
				if !grants(ourCluster, ourRole, p) {
					t.Errorf("upstream's chart grants %v, this one does not", p)
				}
			}
			for _, p := range slices.Concat(expand("cluster", ourCluster), expand("namespace", ourRole)) {
				if grants(upCluster, upRole, p) {
					continue
				}
				if i := listed(u.Extras, p); i >= 0 {
					usedExtras[i] = true
					continue
				}
				t.Errorf("this chart grants %v, upstream's does not, and %s names no feature that needs it (extras)", p, upstreamRBACFile)
			}
		})
	}
	for i, used := range usedExtras {
		if !used {
			t.Errorf("%s: extra %s is not granted in any case (or upstream grants it too): remove it", upstreamRBACFile, describe(u.Extras[i]))
		}
	}
}

func describe(d difference) string {
	return fmt.Sprintf("%s %v %v %v %v", d.Scope, d.APIGroups, d.Resources, d.ResourceNames, d.Verbs)
}
