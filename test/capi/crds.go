package capi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Module is the Cluster API release whose CRDs and controllers the tests run;
// hack/tools/capi/go.mod pins the same version for the controller manager.
// Its Machine template spec has taints (v1.11's has not, so the API server
// pruned them), and it builds on the autoscaler's Kubernetes minor (v0.36).
const Module = "sigs.k8s.io/cluster-api@v1.14.2"

// crdSubdir is where Module keeps the core CRDs (config/crd/bases until
// v1.13; the core controllers moved under core/ in v1.14).
const crdSubdir = "core/config/crd/bases"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDDir downloads Module through the Go module proxy (or finds it in the
// module cache) and returns the directory of its core CRDs.
func CRDDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module)
	cmd.Dir = os.TempDir() // outside this module: the download does not touch go.mod
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", Module, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", Module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", Module, info.Error)
	}
	return filepath.Join(info.Dir, filepath.FromSlash(crdSubdir)), nil
}

// InstallCRDs creates (or leaves in place) every CRD of Cluster API's core
// in dir (the controller manager watches all of them) and the test
// provider's CRDs, and waits until they are established.
func InstallCRDs(ctx context.Context, client dynamic.Interface, dir string) error {
	crds, err := ReadCRDs(dir)
	if err != nil {
		return err
	}
	return CreateCRDs(ctx, client, append(crds, testCRDs()...))
}

// ReadCRDs reads every *.yaml file of dir as one CRD.
func ReadCRDs(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, u)
	}
	return crds, nil
}

// CreateCRDs creates (or leaves in place) crds and waits until they are
// established.
func CreateCRDs(ctx context.Context, client dynamic.Interface, crds []*unstructured.Unstructured) error {
	var err error
	for _, u := range crds {
		_, err = client.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", u.GetName(), err)
		}
	}
	for _, u := range crds {
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.Resource(crdGVR).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", u.GetName(), err)
		}
	}
	return nil
}

// The test provider's API: kinds in Cluster API's provider groups, at
// version v1alpha1, labelled as implementing the v1beta2 contract (Cluster
// API finds the version of a referenced kind through that label).
const (
	InfraGroup        = "infrastructure.cluster.x-k8s.io"
	ControlPlaneGroup = "controlplane.cluster.x-k8s.io"
	TestVersion       = "v1alpha1"
)

// TestGVR is the resource of one of the test provider's kinds.
func TestGVR(group, kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: TestVersion, Resource: strings.ToLower(kind) + "s"}
}

// testCRDs are schemaless CRDs (any fields) with a status subresource.
func testCRDs() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, k := range []struct{ group, kind string }{
		{InfraGroup, "TestCluster"}, {InfraGroup, "TestMachine"}, {InfraGroup, "TestMachineTemplate"},
		{ControlPlaneGroup, "TestControlPlane"},
	} {
		plural := strings.ToLower(k.kind) + "s"
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{
				"name":   plural + "." + k.group,
				"labels": map[string]any{Group + "/v1beta2": TestVersion},
			},
			"spec": map[string]any{
				"group": k.group, "scope": "Namespaced",
				"names": map[string]any{"kind": k.kind, "listKind": k.kind + "List", "plural": plural,
					"singular": strings.ToLower(k.kind)},
				"versions": []any{map[string]any{
					"name": TestVersion, "served": true, "storage": true,
					"subresources": map[string]any{"status": map[string]any{}},
					"schema": map[string]any{"openAPIV3Schema": map[string]any{
						"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
				}},
			},
		}})
	}
	return out
}
