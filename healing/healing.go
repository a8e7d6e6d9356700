package healing

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/disruption"
)

// The names of node healing, now disruption's.
const (
	Annotation        = disruption.Annotation
	Taint             = disruption.Taint
	ControlPlaneLabel = disruption.ControlPlaneLabel
	PhaseStart        = disruption.PhaseStart
	PhaseEnd          = disruption.PhaseEnd
	StateConfigMap    = disruption.StateConfigMap
	StatusKey         = disruption.StatusKey
	OutOfServiceTaint = disruption.OutOfServiceTaint

	PhaseStarting  = disruption.PhaseStarting
	PhaseSurging   = disruption.PhaseSurging
	PhaseDraining  = disruption.PhaseDraining
	PhaseDeleting  = disruption.PhaseDeleting
	PhaseFencing   = disruption.PhaseFencing
	PhaseReplacing = disruption.PhaseReplacing
	PhaseFinishing = disruption.PhaseFinishing
	PhaseRestoring = disruption.PhaseRestoring

	OutcomeHealed    = disruption.OutcomeHealed
	OutcomeRestored  = disruption.OutcomeRestored
	OutcomeCancelled = disruption.OutcomeCancelled
	OutcomeFailed    = disruption.OutcomeFailed
)

// Types of node healing, now disruption's.
type (
	Options     = disruption.Options
	Policy      = disruption.Policy
	Hook        = disruption.Hook
	HooksConfig = disruption.HooksConfig
	HookRequest = disruption.HookRequest
	Duration    = disruption.Duration
	// Healer is the disruption engine.
	Healer = disruption.Engine
)

// New returns the disruption engine with healing on (opts.Healing set).
func New(opts Options, client kubernetes.Interface, provider cloudprovider.CloudProvider, recorder record.EventRecorder,
	reg prometheus.Registerer) *Healer {
	opts.Healing = true
	return disruption.New(opts, client, provider, recorder, reg)
}

// ParsePolicy parses a --node-healing-policy value.
func ParsePolicy(s string) (Policy, error) { return disruption.ParsePolicy(s) }

// LoadHooks reads and validates the hooks file.
func LoadHooks(path string) ([]Hook, error) { return disruption.LoadHooks(path) }

// ParseHooks parses and validates a hooks document.
func ParseHooks(data []byte) ([]Hook, error) { return disruption.ParseHooks(data) }

// PolicyStrings renders policies for logs.
func PolicyStrings(ps []Policy) string { return disruption.PolicyStrings(ps) }
