package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ConfigMapRecords keeps string records, by key, in the data of one
// ConfigMap: the request processor's records of the all-or-nothing attempts
// in flight. Only the leader writes it; each Save replaces the whole data.
type ConfigMapRecords struct {
	client          kubernetes.Interface
	namespace, name string

	mu     sync.Mutex
	exists bool
	rv     string // the version last read or written
}

// NewConfigMapRecords returns the records kept in ConfigMap namespace/name.
func NewConfigMapRecords(client kubernetes.Interface, namespace, name string) *ConfigMapRecords {
	return &ConfigMapRecords{client: client, namespace: namespace, name: name}
}

// Load returns the records; none when the ConfigMap does not exist.
func (s *ConfigMapRecords) Load(ctx context.Context) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load(ctx)
}

func (s *ConfigMapRecords) load(ctx context.Context) (map[string]string, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.exists, s.rv = false, ""
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	s.exists, s.rv = true, cm.ResourceVersion
	out := maps.Clone(cm.Data)
	if out == nil {
		out = map[string]string{}
	}
	return out, nil
}

// saveAttempts bounds the writes of one Save that meet another writer.
const saveAttempts = 3

// Save replaces the records with data. The write names the version last
// seen; when someone else changed the ConfigMap since (a person editing
// it), the version is read again and data written over it: the leader's
// records are the truth once they were loaded.
func (s *ConfigMapRecords) Save(ctx context.Context, data map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		err := s.write(ctx, data)
		if err == nil {
			return nil
		}
		if (!apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err)) || attempt == saveAttempts {
			return fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, s.name, err)
		}
		if _, lerr := s.load(ctx); lerr != nil {
			return errors.Join(fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, s.name, err), lerr)
		}
	}
}

func (s *ConfigMapRecords) write(ctx context.Context, data map[string]string) error {
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	if !s.exists && len(data) == 0 {
		return nil
	}
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, ResourceVersion: s.rv},
		Data: data}
	var out *apiv1.ConfigMap
	var err error
	if s.exists {
		out, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	} else {
		out, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	s.exists, s.rv = true, out.ResourceVersion
	return nil
}

// Reference is the ConfigMap, for events about the records.
func (s *ConfigMapRecords) Reference() *apiv1.ObjectReference {
	return &apiv1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: s.namespace, Name: s.name}
}
