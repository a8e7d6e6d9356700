package kwok

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// TestLoadConfigNeedsOptIn: the provider starts only against a cluster that
// holds its ConfigMap or with --kwok-provider-enabled. --nodes alone (an AWS
// values file rendered with cloudProvider kwok) and a --cloud-config file
// alone are refused with an error that names both ways in, before any file
// is read.
func TestLoadConfigNeedsOptIn(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(file, []byte(oneGroup), 0o600); err != nil {
		t.Fatal(err)
	}
	withConfigMap := func() *fake.Clientset {
		return fake.NewClientset(&apiv1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: testNamespace},
			Data:       map[string]string{"config": strings.ReplaceAll(oneGroup, "pool", "from-configmap")},
		})
	}
	for name, tc := range map[string]struct {
		client    *fake.Clientset
		opts      cloudprovider.Options
		wantGroup string // "" : refused
	}{
		"--nodes alone": {client: fake.NewClientset(),
			opts: cloudprovider.Options{NodeGroups: []string{"1:10:my-asg"}}},
		"--cloud-config alone": {client: fake.NewClientset(),
			opts: cloudprovider.Options{CloudConfig: file}},
		"--cloud-config of a missing file alone": {client: fake.NewClientset(),
			opts: cloudprovider.Options{CloudConfig: "/nonexistent/kwok.yaml"}},
		"flag and --nodes": {client: fake.NewClientset(),
			opts: cloudprovider.Options{KwokProviderEnabled: true, NodeGroups: []string{"1:10:my-asg"}}, wantGroup: "my-asg"},
		"flag and --cloud-config": {client: fake.NewClientset(),
			opts: cloudprovider.Options{KwokProviderEnabled: true, CloudConfig: file}, wantGroup: "pool"},
		"ConfigMap": {client: withConfigMap(), wantGroup: "from-configmap"},
		"ConfigMap and --cloud-config": {client: withConfigMap(),
			opts: cloudprovider.Options{CloudConfig: file}, wantGroup: "pool"},
		"ConfigMap and --nodes": {client: withConfigMap(),
			opts: cloudprovider.Options{NodeGroups: []string{"1:10:my-asg"}}, wantGroup: "from-configmap"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.opts.Namespace = testNamespace
			cfg, err := loadConfig(context.Background(), cloudprovider.BuildOptions{Options: tc.opts, KubeClient: tc.client})
			if tc.wantGroup == "" {
				if !errors.Is(err, ErrNotOptedIn) {
					t.Fatalf("err %v, want ErrNotOptedIn", err)
				}
				for _, want := range []string{"kube-system/kwok-provider-config", EnabledFlag, "--cloud-provider", "simulated Node"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NodeGroups[0].Name != tc.wantGroup {
				t.Errorf("first group %q, want %q", cfg.NodeGroups[0].Name, tc.wantGroup)
			}
		})
	}
}

// TestOptInConfigMapUnreadable: when the ConfigMap cannot be read (RBAC),
// the provider cannot tell whether the cluster is meant for it and refuses,
// unless the flag opts in and a file holds the config (then it is not read).
func TestOptInConfigMapUnreadable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(file, []byte(oneGroup), 0o600); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(configMapsResource, ConfigMapName, errors.New("no RBAC"))
	})
	build := func(o cloudprovider.Options) error {
		o.Namespace = testNamespace
		_, err := loadConfig(context.Background(), cloudprovider.BuildOptions{Options: o, KubeClient: client})
		return err
	}
	if err := build(cloudprovider.Options{CloudConfig: file}); !errors.Is(err, ErrNotOptedIn) || !apierrors.IsForbidden(err) {
		t.Errorf("without the flag: err %v, want ErrNotOptedIn naming the read error", err)
	}
	if err := build(cloudprovider.Options{CloudConfig: file, KwokProviderEnabled: true}); err != nil {
		t.Errorf("flag and --cloud-config: %v", err)
	}
	if err := build(cloudprovider.Options{NodeGroups: []string{"0:3:a"}, KwokProviderEnabled: true}); err == nil || errors.Is(err, ErrNotOptedIn) {
		t.Errorf("flag and --nodes with an unreadable ConfigMap: err %v, want the read error", err)
	}
}
