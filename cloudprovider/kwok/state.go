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
	// registered is true once its Node exists; registered instances are not persisted.
	registered bool
}

func (i *instance) id() string { return ProviderIDPrefix + i.Name }

func (i *instance) status() *cloudprovider.InstanceStatus {
	switch {
	case i.registered:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceRunning}
	case i.Error != nil:
		e := *i.Error
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating, ErrorInfo: &e}
	default:
		return &cloudprovider.InstanceStatus{State: cloudprovider.InstanceCreating}
	}
}

// stateStore persists the unregistered instances in a ConfigMap.
type stateStore struct {
	client    kubernetes.Interface
	namespace string
}

func (s *stateStore) load(ctx context.Context) ([]*instance, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s/%s: %w", s.namespace, StateConfigMap, err)
	}
	var out []*instance
	if data := cm.Data[stateKey]; data != "" {
		if err := json.Unmarshal([]byte(data), &out); err != nil {
			return nil, fmt.Errorf("parsing %s/%s: %w", s.namespace, StateConfigMap, err)
		}
	}
	return out, nil
}

func (s *stateStore) save(ctx context.Context, pending []*instance) error {
	data, err := json.Marshal(pending)
	if err != nil {
		return err
	}
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	cm, err := cms.Get(ctx, StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: s.namespace},
			Data: map[string]string{stateKey: string(data)}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cm.Data = map[string]string{stateKey: string(data)}
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}
