package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	built := false
	r.Register("b", func(context.Context, BuildOptions) (CloudProvider, error) { built = true; return nil, nil })
	r.Register("a", func(context.Context, BuildOptions) (CloudProvider, error) { return nil, errors.New("no config") })
	if diff := cmp.Diff([]string{"a", "b"}, r.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if _, err := r.Build(context.Background(), "gce", BuildOptions{}); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("unknown provider: %v", err)
	}
	if _, err := r.Build(context.Background(), "a", BuildOptions{}); err == nil {
		t.Error("builder error swallowed")
	}
	if _, err := r.Build(context.Background(), "b", BuildOptions{}); err != nil || !built {
		t.Errorf("build b: %v built=%v", err, built)
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	r.Register("a", nil)
}

func TestIsTransient(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "state", errors.New("modified"))
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("no such instance type"), false},
		{"sentinel", fmt.Errorf("saving: %w", ErrTransient), true},
		{"wrapped conflict", fmt.Errorf("recording: %w", conflict), true},
		{"throttled", apierrors.NewTooManyRequests("slow down", 1), true},
		{"unavailable", apierrors.NewServiceUnavailable("etcd"), true},
		{"deadline", fmt.Errorf("calling the cloud: %w", context.DeadlineExceeded), true},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "n", errors.New("rbac")), false},
		{"stockout", NewOutOfResourcesError("STOCKOUT", errors.New("zone full")), false},
		{"stockout wrapping a timeout", NewOutOfResourcesError("STOCKOUT", context.DeadlineExceeded), false},
	} {
		if got := IsTransient(tc.err); got != tc.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	var su *ScaleUpError
	if err := fmt.Errorf("increase: %w", NewOutOfResourcesError("QUOTA_EXCEEDED", nil)); !errors.As(err, &su) ||
		su.Class != OutOfResourcesErrorClass || su.Code != "QUOTA_EXCEEDED" {
		t.Errorf("ScaleUpError not found through wrapping: %v", su)
	}
}
