package healing

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StateConfigMap holds the heals in flight and the nodes in cooldown.
const StateConfigMap = "cluster-autoscaler-healing"

// Phases of a heal, in order.
const (
	PhaseStarting  = "Starting"  // heal_start hook
	PhaseSurging   = "Surging"   // cordoned; the replacement asked for first, waited for
	PhaseDraining  = "Draining"  // cordoned and tainted, pods evicted
	PhaseDeleting  = "Deleting"  // the instance deleted by name
	PhaseReplacing = "Replacing" // waiting for the replacement to be Ready
	PhaseFinishing = "Finishing" // heal_end hook
)

// heal is one heal in flight.
type heal struct {
	Node       string    `json:"node"`
	Group      string    `json:"group"`
	ProviderID string    `json:"providerID"`
	Reason     string    `json:"reason"`
	Phase      string    `json:"phase"`
	Started    time.Time `json:"started"`
	PhaseSince time.Time `json:"phaseSince"`
	// ReadyBefore counts the group's Ready nodes, the healed one aside,
	// when the heal started: the replacement is Ready when there are more.
	ReadyBefore int `json:"readyBefore"`
	// TargetBefore is the group's target size just before the replacement
	// was asked for (nil: not asked yet): a restart that finds the target
	// above it knows the increase went through.
	TargetBefore *int `json:"targetBefore,omitempty"`
	// Increased: the replacement was asked for (IncreaseSize), before the
	// removal when the group had room, else after it.
	Increased bool `json:"increased"`
	// DeleteIssued: DeleteNodes returned for the node; it is never asked again.
	DeleteIssued bool `json:"deleteIssued"`
	ControlPlane bool `json:"controlPlane,omitempty"`
}

// state is the ConfigMap's content.
type state struct {
	Heals    map[string]*heal     `json:"heals"`
	Cooldown map[string]time.Time `json:"cooldown"` // node name -> healing allowed again after
}

type store struct {
	client    kubernetes.Interface
	namespace string
	exists    bool
	rv        string
}

func (s *store) load(ctx context.Context) (*state, error) {
	st := &state{Heals: map[string]*heal{}, Cooldown: map[string]time.Time{}}
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.exists, s.rv = false, ""
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.namespace, StateConfigMap, err)
	}
	s.exists, s.rv = true, cm.ResourceVersion
	if data := cm.Data["state"]; data != "" {
		if err := json.Unmarshal([]byte(data), st); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", s.namespace, StateConfigMap, err)
		}
	}
	if st.Heals == nil {
		st.Heals = map[string]*heal{}
	}
	if st.Cooldown == nil {
		st.Cooldown = map[string]time.Time{}
	}
	return st, nil
}

// save writes st over the version load read; a conflict (another writer)
// is returned, and the caller reloads in its next loop.
func (s *store) save(ctx context.Context, st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: s.namespace, ResourceVersion: s.rv},
		Data: map[string]string{"state": string(data)}}
	var out *apiv1.ConfigMap
	if !s.exists {
		out, err = s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
	} else {
		out, err = s.client.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, StateConfigMap, err)
	}
	s.exists, s.rv = true, out.ResourceVersion
	return nil
}
