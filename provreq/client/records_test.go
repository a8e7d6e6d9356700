package client_test

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// The records round-trip through the ConfigMap; nothing is created for no
// record; a write made by someone else in between is written over; a new
// store (a new leader) reads what the last one wrote.
func TestConfigMapRecords(t *testing.T) {
	env := framework.New(t)
	ctx := env.Context()
	s := client.NewConfigMapRecords(env.Client, env.Namespace, "records")
	got, err := s.Load(ctx)
	if err != nil || len(got) != 0 {
		t.Fatalf("load of a missing ConfigMap: %v, %v; want no record", got, err)
	}
	if err := s.Save(ctx, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(env.Namespace).Get(ctx, "records", metav1.GetOptions{}); err == nil {
		t.Fatal("a ConfigMap was created for no record")
	}
	first := map[string]string{"uid-a": `{"version":1}`, "uid-b": `{"version":1,"nodes":["n1"]}`}
	if err := s.Save(ctx, first); err != nil {
		t.Fatal(err)
	}
	// Someone edits the ConfigMap: the next save writes over the edit.
	cm, err := env.Client.CoreV1().ConfigMaps(env.Namespace).Get(ctx, "records", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["uid-c"] = "edited by hand"
	if _, err := env.Client.CoreV1().ConfigMaps(env.Namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := map[string]string{"uid-b": `{"version":1}`}
	if err := s.Save(ctx, second); err != nil {
		t.Fatalf("save after a change by someone else: %v", err)
	}
	got, err = client.NewConfigMapRecords(env.Client, env.Namespace, "records").Load(ctx)
	if err != nil || !maps.Equal(got, second) {
		t.Errorf("a new store loads %v, %v; want %v", got, err, second)
	}
	// Emptied, the ConfigMap stays with no data.
	if err := s.Save(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Load(ctx); err != nil || len(got) != 0 {
		t.Errorf("after saving no record: %v, %v", got, err)
	}
	if ref := s.Reference(); ref.Kind != "ConfigMap" || ref.Namespace != env.Namespace || ref.Name != "records" {
		t.Errorf("reference %+v", ref)
	}
}
