package cloudprovider

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// BuildOptions is what a provider may use to build itself.
type BuildOptions struct {
	Options         Options
	KubeClient      kubernetes.Interface
	InformerFactory informers.SharedInformerFactory
	ResourceLimiter *ResourceLimiter
	// ReadOnly builds the provider for a command that must change nothing
	// (explain): it starts no background work that writes (a provider
	// that keeps state, or creates what it simulates, stays passive).
	ReadOnly bool
}

// Builder builds one provider.
type Builder func(ctx context.Context, opts BuildOptions) (CloudProvider, error)

// Registry maps --cloud-provider names to builders. It is filled explicitly
// by the composition root: providers do not register themselves.
type Registry struct {
	builders map[string]Builder
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{builders: map[string]Builder{}} }

// Register adds a provider; a second registration of a name panics, as that
// is a programming error of the composition root.
func (r *Registry) Register(name string, b Builder) {
	if _, dup := r.builders[name]; dup {
		panic(fmt.Sprintf("cloud provider %q registered twice", name))
	}
	r.builders[name] = b
}

// Names lists the registered providers, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.builders))
	for n := range r.builders {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Build builds the named provider; an unregistered name wraps ErrUnknownProvider.
func (r *Registry) Build(ctx context.Context, name string, opts BuildOptions) (CloudProvider, error) {
	b, ok := r.builders[name]
	if !ok {
		return nil, fmt.Errorf("%w %q: this build has %v", ErrUnknownProvider, name, r.Names())
	}
	p, err := b(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("building cloud provider %q: %w", name, err)
	}
	return p, nil
}
