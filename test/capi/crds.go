package capi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// Module is the Cluster API release whose CRDs the tests install.
const Module = "sigs.k8s.io/cluster-api@v1.11.3"

// CRDFiles are the CRDs the clusterapi provider reads.
var CRDFiles = []string{
	"cluster.x-k8s.io_machinedeployments.yaml",
	"cluster.x-k8s.io_machinesets.yaml",
	"cluster.x-k8s.io_machines.yaml",
	"cluster.x-k8s.io_machinepools.yaml",
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDDir downloads Module through the Go module proxy (or finds it in the
// module cache) and returns its config/crd/bases directory.
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
	return filepath.Join(info.Dir, "config", "crd", "bases"), nil
}

// InstallCRDs creates (or leaves in place) the CRDs of CRDFiles from dir and
// waits until they are established.
func InstallCRDs(ctx context.Context, client dynamic.Interface, dir string) error {
	for _, f := range CRDFiles {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		_, err = client.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", u.GetName(), err)
		}
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
