package builder

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/core"
	"k8s.io/autoscaler/cluster-autoscaler/scaledown"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

func TestResourceLimiter(t *testing.T) {
	o := config.Defaults()
	o.Cores = config.Range{Min: 2, Max: 64}
	o.MemoryGiB = config.Range{Min: 0, Max: 256}
	o.GPUTotal = []config.GPULimit{{Type: "nvidia-a100", Min: 0, Max: 8}}
	l := ResourceLimiter(o)
	got := map[string][2]int64{}
	for _, r := range l.GetResources() {
		got[r] = [2]int64{l.GetMin(r), l.GetMax(r)}
	}
	want := map[string][2]int64{"cpu": {2, 64}, "memory": {0, 256 << 30}, "nvidia-a100": {0, 8}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if l.HasMaxLimitSet("tpu") {
		t.Error("unset resource reported as limited")
	}
}

// mappings are the builder's functions from the flags to each package's
// options.
var mappings = map[string]func(config.Options) any{
	"clusterstate":  func(o config.Options) any { return ClusterStateOptions(o) },
	"scaledown":     func(o config.Options) any { return ScaleDownOptions(o) },
	"drain":         func(o config.Options) any { return DrainOptions(o) },
	"scaleup":       func(o config.Options) any { return ScaleUpOptions(o) },
	"core":          func(o config.Options) any { return CoreOptions(o) },
	"cloudprovider": func(o config.Options) any { return ProviderOptions(o) },
}

// TestDefaultOptions: each package's DefaultOptions are what the builder
// makes of the flags' defaults.
func TestDefaultOptions(t *testing.T) {
	d := config.Defaults()
	for _, c := range []struct {
		pkg       string
		got, want any
	}{
		{"clusterstate", clusterstate.DefaultOptions(), ClusterStateOptions(d)},
		{"scaleup", scaleup.DefaultOptions(), ScaleUpOptions(d)},
		{"scaledown", scaledown.DefaultOptions(), ScaleDownOptions(d)},
		{"core", core.DefaultOptions(), CoreOptions(d)},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s.DefaultOptions() differ from the builder's mapping of config.Defaults() (-mapped +default):\n%s", c.pkg, diff)
		}
	}
}

// TestOptionsMapping: every field of each package's options comes from the
// flag of the same name (the last part of its path: ClusterState.Taints.
// StartupTaints from StartupTaints), and from no other. Starting from flags
// that all differ from one another, each flag in turn is changed; the
// fields of the mapped options that change with it must be named as it,
// and every field must change with some flag.
func TestOptionsMapping(t *testing.T) {
	base := config.Defaults()
	n := 0
	fill(reflect.ValueOf(&base).Elem(), &n)
	flags := leaves(reflect.ValueOf(base), "")
	for pkg, mapping := range mappings {
		before := leafValues(mapping(base))
		set := map[string]bool{}
		for _, flag := range flags {
			changed := base
			fill(fieldAt(reflect.ValueOf(&changed).Elem(), flag), &n)
			after := leafValues(mapping(changed))
			for path, v := range after {
				if reflect.DeepEqual(v, before[path]) {
					continue
				}
				set[path] = true
				if path != flag && !strings.HasSuffix(path, "."+flag) {
					t.Errorf("%s: field %s changes with flag field %s", pkg, path, flag)
				}
			}
		}
		for path := range before {
			if !set[path] {
				t.Errorf("%s: field %s is set from no flag", pkg, path)
			}
		}
	}
}

// fill gives every settable leaf under v a value of its own, counting
// with n: no two leaves of the same type are equal, and none is zero.
func fill(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.String:
		v.SetString(fmt.Sprintf("flag-%d", *n))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), n)
		v.Set(s)
	default:
		panic(fmt.Sprintf("fill: unhandled kind %s", v.Kind()))
	}
}

// leaves are the dotted paths of the non-struct fields under v (slices are
// leaves).
func leaves(v reflect.Value, prefix string) []string {
	var out []string
	for i := range v.NumField() {
		path := prefix + v.Type().Field(i).Name
		if v.Field(i).Kind() == reflect.Struct {
			out = append(out, leaves(v.Field(i), path+".")...)
			continue
		}
		out = append(out, path)
	}
	return out
}

func leafValues(x any) map[string]any {
	v := reflect.ValueOf(x)
	out := map[string]any{}
	for _, path := range leaves(v, "") {
		out[path] = fieldAt(v, path).Interface()
	}
	return out
}

func fieldAt(v reflect.Value, path string) reflect.Value {
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}
