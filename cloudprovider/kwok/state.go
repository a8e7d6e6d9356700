package kwok

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// Keys the provider writes on the Nodes it creates.
const (
	// NodeGroupAnnotation names a Node's group (upstream's kwok provider key).
	NodeGroupAnnotation = "cluster-autoscaler.kwok.nodegroup/name"
	// KwokNodeAnnotation makes kwok manage the Node.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// ProviderIDPrefix starts every instance id and Node spec.providerID.
	ProviderIDPrefix = "kwok://"
	// StateConfigMap holds the instances that have no Node yet.
	StateConfigMap = "kwok-provider-state"
	stateKey       = "instances"
)

// instance is one simulated cloud instance.
type instance struct {
	Name      string    `json:"name"`
	Group     string    `json:"group"`
	CreatedAt time.Time `json:"createdAt"`
	// RegisterAt is when its Node is due; zero means never.
	RegisterAt time.Time                        `json:"registerAt,omitzero"`
	Error      *cloudprovider.InstanceErrorInfo `json:"error,omitempty"`
	// FailAt is when a failed instance's Error shows; until then it looks
	// like one being created. Zero: at once.
	FailAt time.Time `json:"failAt,omitzero"`
	// DeleteAt is when the scheduler deletes a deleted instance's Node and
	// then the instance: the deletion itself for faults.deletionDelay, the
	// next try when deleting the Node failed. Until then it is listed as
	// being deleted, and it is persisted even when registered. Zero: not
	// being deleted.
	DeleteAt time.Time `json:"deleteAt,omitzero"`
	// registered is true once its Node exists; registered instances are not persisted.
	registered bool
	// held keeps the instance from its Node until the increase that made it
	// is recorded: an increase that fails is undone, and nothing of it
	// may have appeared.
	held bool
}

func (i *instance) id() string { return ProviderIDPrefix + i.Name }

func (i *instance) status(now time.Time) *cloudprovider.InstanceStatus {
	switch {
	case !i.DeleteAt.IsZero():
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceDeleting}
	case i.registered:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	case i.Error != nil && !now.Before(i.FailAt):
		e := *i.Error
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &e}
	default:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	}
}

// stateStore persists the unregistered instances in a ConfigMap. The
// provider serialises its writes (Provider.flush), so the only conflicts are
// with writers outside this process; each is retried on a fresh read, and
// since every write carries the provider's whole pending state, the retry
// loses nothing.
type stateStore struct {
	client    kubernetes.Interface
	namespace string
	// last is the ConfigMap as last read or written, so a write needs no
	// read first unless someone else changed it.
	last *apiv1.ConfigMap
}

func (s *stateStore) load(ctx context.Context) ([]*instance, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", s.namespace, StateConfigMap, err)
	}
	s.last = cm
	var out []*instance
	if data := cm.Data[stateKey]; data != "" {
		if err := json.Unmarshal([]byte(data), &out); err != nil {
			return nil, fmt.Errorf("parsing %s/%s: %w", s.namespace, StateConfigMap, err)
		}
	}
	return out, nil
}

// saveAttempts bounds the conflict retries of one save; each retry reads the
// ConfigMap afresh.
const saveAttempts = 8

// save writes pending as the whole state. Callers serialise their calls.
func (s *stateStore) save(ctx context.Context, pending []*instance) error {
	data, err := json.Marshal(pending)
	if err != nil {
		return err
	}
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	for attempt := 1; ; attempt++ {
		err = s.write(ctx, cms, string(data))
		if err == nil {
			return nil
		}
		s.last = nil // read afresh before the next write
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("writing %s/%s: %w", s.namespace, StateConfigMap, err)
		}
		if attempt == saveAttempts || ctx.Err() != nil {
			return fmt.Errorf("writing %s/%s: still conflicting after %d attempts: %w", s.namespace, StateConfigMap,
				attempt, err)
		}
	}
}

// write creates or updates the ConfigMap from the last version seen,
// reading it first when there is none.
func (s *stateStore) write(ctx context.Context, cms typedcorev1.ConfigMapInterface, data string) error {
	cm := s.last
	if cm == nil {
		got, err := cms.Get(ctx, StateConfigMap, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			cm = &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: s.namespace},
				Data: map[string]string{stateKey: data}}
			created, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			if err == nil {
				s.last = created
			}
			return err
		case err != nil:
			return err
		}
		cm = got
	}
	cm = cm.DeepCopy()
	cm.Data = map[string]string{stateKey: data}
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err == nil {
		s.last = updated
	}
	return err
}
