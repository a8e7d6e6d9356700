package disruption

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Annotation asks for a node to be healed; its value is the reason.
const Annotation = "cluster-autoscaler.kubernetes.io/heal"

// Taint marks a node being healed (its value is the phase), with the node
// cordoned; scale-down leaves such a node alone.
const Taint = "cluster-autoscaler.kubernetes.io/healing"

// ControlPlaneLabel marks control-plane nodes, healed only with hooks for them.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// Hook phases.
const (
	PhaseStart = "heal_start"
	PhaseEnd   = "heal_end"
)

// Policy heals a node whose condition Type has had Status for at least For.
type Policy struct {
	Type   apiv1.NodeConditionType
	Status apiv1.ConditionStatus
	For    time.Duration
}

func (p Policy) String() string { return fmt.Sprintf("%s=%s:%s", p.Type, p.Status, p.For) }

// ParsePolicy parses <ConditionType>=<True|False|Unknown>:<duration>, the
// syntax of --node-healing-policy.
func ParsePolicy(s string) (Policy, error) {
	cond, dur, ok := strings.Cut(s, ":")
	typ, status, ok2 := strings.Cut(cond, "=")
	if !ok || !ok2 || typ == "" {
		return Policy{}, fmt.Errorf("%q is not <ConditionType>=<True|False|Unknown>:<duration>", s)
	}
	st := apiv1.ConditionStatus(status)
	if st != apiv1.ConditionTrue && st != apiv1.ConditionFalse && st != apiv1.ConditionUnknown {
		return Policy{}, fmt.Errorf("%q: status %q is not True, False or Unknown", s, status)
	}
	d, err := time.ParseDuration(dur)
	if err != nil || d <= 0 {
		return Policy{}, fmt.Errorf("%q: duration %q must be positive, like 5m", s, dur)
	}
	return Policy{Type: apiv1.NodeConditionType(typ), Status: st, For: d}, nil
}

// Hook is one HTTP(S) endpoint called at some phases of every heal.
type Hook struct {
	Name    string   `json:"name"`
	URL     string   `json:"url"`
	Phases  []string `json:"phases"`
	Timeout Duration `json:"timeout,omitempty"`
	// CAFile or CABundle (PEM) verifies an https URL; none: the system roots.
	CAFile   string `json:"caFile,omitempty"`
	CABundle string `json:"caBundle,omitempty"`
	// FailurePolicy Fail (default) stops the heal when the hook does not
	// answer 2xx in time (at heal_start, before the node is touched);
	// Ignore goes on.
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// ControlPlane also calls the hook for control-plane nodes, which are
	// healed only when a hook says so (etcd membership and the like are the
	// hooks' job).
	ControlPlane bool `json:"controlPlane,omitempty"`

	roots *x509.CertPool
}

// HooksConfig is the file --node-healing-hooks-config names.
type HooksConfig struct {
	Hooks []Hook `json:"hooks"`
}

// Duration is a time.Duration written "10s".
type Duration struct{ time.Duration }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("durations are strings such as \"10s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// LoadHooks reads and validates the hooks file; an empty path means no hooks.
func LoadHooks(path string) ([]Hook, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--node-healing-hooks-config: %w", err)
	}
	hooks, err := ParseHooks(data)
	if err != nil {
		return nil, fmt.Errorf("--node-healing-hooks-config %s: %w", path, err)
	}
	return hooks, nil
}

// ParseHooks parses and validates a hooks document, reporting every problem.
func ParseHooks(data []byte) ([]Hook, error) {
	var c HooksConfig
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, err
	}
	var errs []error
	for i := range c.Hooks {
		h := &c.Hooks[i]
		where := fmt.Sprintf("hooks[%d] (%s)", i, h.Name)
		u, err := url.Parse(h.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: url %q must be an absolute http or https URL", where, h.URL))
		}
		if len(h.Phases) == 0 {
			errs = append(errs, fmt.Errorf("%s: phases must list %s and/or %s", where, PhaseStart, PhaseEnd))
		}
		for _, p := range h.Phases {
			if p != PhaseStart && p != PhaseEnd {
				errs = append(errs, fmt.Errorf("%s: phase %q is not %s or %s", where, p, PhaseStart, PhaseEnd))
			}
		}
		if h.Timeout.Duration == 0 {
			h.Timeout.Duration = 10 * time.Second
		}
		if h.Timeout.Duration < 0 || h.Timeout.Duration > 5*time.Minute {
			errs = append(errs, fmt.Errorf("%s: timeout %v must be in (0, 5m]", where, h.Timeout.Duration))
		}
		switch h.FailurePolicy {
		case "":
			h.FailurePolicy = "Fail"
		case "Fail", "Ignore":
		default:
			errs = append(errs, fmt.Errorf("%s: failurePolicy %q is not Fail or Ignore", where, h.FailurePolicy))
		}
		pem := []byte(h.CABundle)
		if h.CAFile != "" {
			if h.CABundle != "" {
				errs = append(errs, fmt.Errorf("%s: set caFile or caBundle, not both", where))
			}
			if pem, err = os.ReadFile(h.CAFile); err != nil {
				errs = append(errs, fmt.Errorf("%s: caFile: %w", where, err))
			}
		}
		if len(pem) > 0 {
			h.roots = x509.NewCertPool()
			if !h.roots.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("%s: no PEM certificate in the CA bundle", where))
			}
		}
	}
	return c.Hooks, errors.Join(errs...)
}
