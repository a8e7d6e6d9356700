package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

// Client reaches the autoscaling.x-k8s.io/v1beta1 CapacityBuffer API.
type Client struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

// NewForConfig returns a client for the cluster cfg points at. Bodies are
// JSON whatever cfg says: custom resources have no protobuf form.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering the CapacityBuffer types: %w", err)
	}
	// The unversioned option types (ListOptions, ...) for query parameters.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &v1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("creating the CapacityBuffer REST client: %w", err)
	}
	return &Client{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

// CapacityBuffers returns the buffers of one namespace; "" means all
// namespaces, for List and Watch.
func (c *Client) CapacityBuffers(namespace string) *CapacityBuffers {
	return &CapacityBuffers{
		ClientWithList: gentype.NewClientWithList(v1.ResourcePlural, c.rest, c.params, namespace,
			func() *v1.CapacityBuffer { return &v1.CapacityBuffer{} },
			func() *v1.CapacityBufferList { return &v1.CapacityBufferList{} }),
		namespace: namespace,
	}
}

// CapacityBuffers is the typed client of one namespace. The embedded client
// gives Get, List, Watch, Create, Update, UpdateStatus, Delete,
// DeleteCollection and Patch.
type CapacityBuffers struct {
	*gentype.ClientWithList[*v1.CapacityBuffer, *v1.CapacityBufferList]
	namespace string
}

// statusApply is the body of a server-side apply to the status subresource:
// identity plus status, so the writer claims no spec or metadata field.
type statusApply struct {
	APIVersion string                  `json:"apiVersion"`
	Kind       string                  `json:"kind"`
	Metadata   applyMetadata           `json:"metadata"`
	Status     v1.CapacityBufferStatus `json:"status"`
}

type applyMetadata struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ApplyStatus writes status to the buffer's status subresource with
// server-side apply as opts.FieldManager (required) and returns the object
// as stored.
//
// status.conditions is a list-map keyed by type, so each field manager owns
// the condition types it applies: the controller its translation
// (ReadyForProvisioning, LimitedByQuotas, and the other status fields), the
// autoscaler's loop its Provisioning condition. The applied status is the
// manager's whole intent: a field or condition it applied before and leaves
// out now is removed. Nothing is created: a missing buffer is a NotFound
// error.
func (b *CapacityBuffers) ApplyStatus(ctx context.Context, name string, status v1.CapacityBufferStatus,
	opts metav1.ApplyOptions) (*v1.CapacityBuffer, error) {
	if opts.FieldManager == "" {
		return nil, errors.New("applying CapacityBuffer status: a field manager is required")
	}
	if b.namespace == "" || name == "" {
		return nil, errors.New("applying CapacityBuffer status: namespace and name are required")
	}
	body, err := json.Marshal(statusApply{
		APIVersion: v1.SchemeGroupVersion.String(),
		Kind:       v1.Kind,
		Metadata:   applyMetadata{Name: name, Namespace: b.namespace},
		Status:     status,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the status of CapacityBuffer %s/%s: %w", b.namespace, name, err)
	}
	cb, err := b.Patch(ctx, name, types.ApplyPatchType, body, opts.ToPatchOptions(), "status")
	if err != nil {
		return nil, fmt.Errorf("applying the status of CapacityBuffer %s/%s as %q: %w", b.namespace, name, opts.FieldManager, err)
	}
	return cb, nil
}
