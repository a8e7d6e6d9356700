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

	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// Client reaches the autoscaling.x-k8s.io/v1 ProvisioningRequest API.
type Client struct {
	rest   rest.Interface
	params runtime.ParameterCodec
}

// NewForConfig returns a client for the cluster cfg points at. The request
// bodies are JSON, whatever cfg says: custom resources have no protobuf form.
func NewForConfig(cfg *rest.Config) (*Client, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
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
		return nil, fmt.Errorf("creating the ProvisioningRequest REST client: %w", err)
	}
	return &Client{rest: rc, params: runtime.NewParameterCodec(scheme)}, nil
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("registering the ProvisioningRequest types: %w", err)
	}
	// The unversioned option types (ListOptions, ...) for query parameters.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return scheme, nil
}

// RESTClient returns the underlying REST client.
func (c *Client) RESTClient() rest.Interface { return c.rest }

// ProvisioningRequests returns the requests of one namespace; "" means all
// namespaces, for List and Watch.
func (c *Client) ProvisioningRequests(namespace string) *ProvisioningRequests {
	return &ProvisioningRequests{
		ClientWithList: gentype.NewClientWithList(v1.ResourcePlural, c.rest, c.params, namespace,
			func() *v1.ProvisioningRequest { return &v1.ProvisioningRequest{} },
			func() *v1.ProvisioningRequestList { return &v1.ProvisioningRequestList{} }),
		namespace: namespace,
	}
}

// ProvisioningRequests is the typed client of one namespace. The embedded
// client gives Get, List, Watch, Create, Update, UpdateStatus, Delete,
// DeleteCollection and Patch.
type ProvisioningRequests struct {
	*gentype.ClientWithList[*v1.ProvisioningRequest, *v1.ProvisioningRequestList]
	namespace string
}

// statusApply is the body of a server-side apply to the status subresource:
// identity plus status, so the writer claims no spec or metadata field.
type statusApply struct {
	APIVersion string                       `json:"apiVersion"`
	Kind       string                       `json:"kind"`
	Metadata   applyMetadata                `json:"metadata"`
	Status     v1.ProvisioningRequestStatus `json:"status"`
}

type applyMetadata struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ApplyStatus writes status to the request's status subresource with
// server-side apply as opts.FieldManager (required), and returns the object
// as stored.
//
// The CRD declares status.conditions a list-map keyed by type, so the API
// server merges per condition type: each field manager owns the conditions it
// applied, and an apply by one manager never removes or changes another's
// conditions (unless opts.Force takes over a condition type that another
// manager owns; without Force that is a conflict error). The applied status is
// the manager's whole intent: a condition type or class detail that this
// manager applied before and leaves out now is removed. So build status from
// the manager's own conditions (provreq.ConditionsOfTypes) plus the change,
// not from the single condition being set. An empty status releases
// everything the manager owned. Nothing is created: a missing request is a
// NotFound error.
func (p *ProvisioningRequests) ApplyStatus(ctx context.Context, name string, status v1.ProvisioningRequestStatus,
	opts metav1.ApplyOptions) (*v1.ProvisioningRequest, error) {
	if opts.FieldManager == "" {
		return nil, errors.New("applying ProvisioningRequest status: a field manager is required")
	}
	if p.namespace == "" || name == "" {
		return nil, errors.New("applying ProvisioningRequest status: namespace and name are required")
	}
	body, err := json.Marshal(statusApply{
		APIVersion: v1.SchemeGroupVersion.String(),
		Kind:       v1.Kind,
		Metadata:   applyMetadata{Name: name, Namespace: p.namespace},
		Status:     status,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding the status of ProvisioningRequest %s/%s: %w", p.namespace, name, err)
	}
	pr, err := p.Patch(ctx, name, types.ApplyPatchType, body, opts.ToPatchOptions(), "status")
	if err != nil {
		return nil, fmt.Errorf("applying the status of ProvisioningRequest %s/%s as %q: %w", p.namespace, name, opts.FieldManager, err)
	}
	return pr, nil
}
