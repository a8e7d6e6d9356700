package provreq

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

func TestParseValidUntilSeconds(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]v1.Parameter
		want    time.Duration
		wantSet bool
		wantErr bool
	}{
		{name: "nil params"},
		{name: "absent", params: map[string]v1.Parameter{ParamNoRetry: "true"}},
		{name: "one minute", params: map[string]v1.Parameter{ParamValidUntilSeconds: "60"}, want: time.Minute, wantSet: true},
		{name: "leading zeros", params: map[string]v1.Parameter{ParamValidUntilSeconds: "0030"}, want: 30 * time.Second, wantSet: true},
		{name: "largest", params: map[string]v1.Parameter{ParamValidUntilSeconds: "9223372036"}, want: 9223372036 * time.Second, wantSet: true},
		{name: "too large for a duration", params: map[string]v1.Parameter{ParamValidUntilSeconds: "9223372037"}, wantSet: true, wantErr: true},
		{name: "overflows int64", params: map[string]v1.Parameter{ParamValidUntilSeconds: "99999999999999999999"}, wantSet: true, wantErr: true},
		{name: "zero", params: map[string]v1.Parameter{ParamValidUntilSeconds: "0"}, wantSet: true, wantErr: true},
		{name: "negative", params: map[string]v1.Parameter{ParamValidUntilSeconds: "-5"}, wantSet: true, wantErr: true},
		{name: "plus sign", params: map[string]v1.Parameter{ParamValidUntilSeconds: "+5"}, wantSet: true, wantErr: true},
		{name: "empty", params: map[string]v1.Parameter{ParamValidUntilSeconds: ""}, wantSet: true, wantErr: true},
		{name: "with unit", params: map[string]v1.Parameter{ParamValidUntilSeconds: "60s"}, wantSet: true, wantErr: true},
		{name: "fraction", params: map[string]v1.Parameter{ParamValidUntilSeconds: "1.5"}, wantSet: true, wantErr: true},
		{name: "spaces", params: map[string]v1.Parameter{ParamValidUntilSeconds: " 60"}, wantSet: true, wantErr: true},
		{name: "other case key is not ours", params: map[string]v1.Parameter{"validUntilSeconds": "60"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, set, err := ParseValidUntilSeconds(tc.params)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want || set != tc.wantSet {
				t.Errorf("ParseValidUntilSeconds = %v, %v; want %v, %v", got, set, tc.want, tc.wantSet)
			}
		})
	}
}

func TestValidUntil(t *testing.T) {
	created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	pr := &v1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	if _, set, err := ValidUntil(pr); set || err != nil {
		t.Errorf("no parameter: set=%v err=%v", set, err)
	}
	pr.Spec.Parameters = map[string]v1.Parameter{ParamValidUntilSeconds: "90"}
	deadline, set, err := ValidUntil(pr)
	if err != nil || !set || !deadline.Equal(created.Add(90*time.Second)) {
		t.Errorf("ValidUntil = %v, %v, %v", deadline, set, err)
	}
	pr.Spec.Parameters[ParamValidUntilSeconds] = "soon"
	if _, set, err := ValidUntil(pr); !set || err == nil {
		t.Errorf("bad value: set=%v err=%v, want set and an error", set, err)
	}
}

func TestParseNoRetry(t *testing.T) {
	tests := []struct {
		value   v1.Parameter
		absent  bool
		want    bool
		wantErr bool
	}{
		{absent: true},
		{value: "true", want: true},
		{value: "false"},
		{value: "True", want: true},
		{value: "yes", wantErr: true},
		{value: "", wantErr: true},
	}
	for _, tc := range tests {
		params := map[string]v1.Parameter{ParamNoRetry: tc.value}
		if tc.absent {
			params = nil
		}
		got, err := ParseNoRetry(params)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseNoRetry(%q, absent=%v) = %v, %v; want %v, err %v", tc.value, tc.absent, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestProcessorInstance(t *testing.T) {
	if got := ProcessorInstance(nil); got != "" {
		t.Errorf("ProcessorInstance(nil) = %q", got)
	}
	if got := ProcessorInstance(map[string]v1.Parameter{ParamProcessorInstance: "checker"}); got != "checker" {
		t.Errorf("ProcessorInstance = %q", got)
	}
}

func TestValidatePodSets(t *testing.T) {
	set := func(name string, count int32) v1.PodSet {
		return v1.PodSet{PodTemplateRef: v1.Reference{Name: name}, Count: count}
	}
	many := make([]v1.PodSet, MaxPodSets+1)
	for i := range many {
		many[i] = set("t", 1)
	}
	for _, tc := range []struct {
		name    string
		sets    []v1.PodSet
		wantErr bool
	}{
		{name: "one", sets: []v1.PodSet{set("t", 1)}},
		{name: "the most", sets: many[:MaxPodSets]},
		{name: "none", wantErr: true},
		{name: "too many", sets: many, wantErr: true},
		{name: "zero count", sets: []v1.PodSet{set("t", 0)}, wantErr: true},
		{name: "negative count hiding a huge one", sets: []v1.PodSet{set("t", 1<<31-1), set("t", -1<<31)}, wantErr: true},
		{name: "no template", sets: []v1.PodSet{set("", 1)}, wantErr: true},
	} {
		if err := ValidatePodSets(tc.sets); (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, wantErr %v", tc.name, err, tc.wantErr)
		}
	}
}

func TestParseBoolParameter(t *testing.T) {
	params := map[string]v1.Parameter{"yes": "True", "no": "0", "bad": "yes"}
	for key, want := range map[string]bool{"yes": true, "no": false, "absent": false} {
		if got, err := ParseBoolParameter(params, key); err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", key, got, err, want)
		}
	}
	if _, err := ParseBoolParameter(params, "bad"); err == nil {
		t.Error("yes read as a boolean")
	}
}

func TestParseMaxRunDurationSeconds(t *testing.T) {
	tests := []struct {
		name    string
		value   *v1.Parameter
		want    time.Duration
		wantSet bool
		wantErr string
	}{
		{name: "absent"},
		{name: "twenty seconds", value: ptr("20"), want: 20 * time.Second, wantSet: true},
		{name: "seven days, GKE's cap", value: ptr("604800"), want: 7 * 24 * time.Hour, wantSet: true},
		{name: "one second more than seven days", value: ptr("604801"), wantSet: true, wantErr: "above the limit of 604800 seconds"},
		{name: "overflows int64", value: ptr("99999999999999999999"), wantSet: true, wantErr: "above the limit"},
		{name: "zero", value: ptr("0"), wantSet: true, wantErr: "at least 1"},
		{name: "negative", value: ptr("-20"), wantSet: true, wantErr: "not a whole number"},
		{name: "with unit", value: ptr("20s"), wantSet: true, wantErr: "not a whole number"},
		{name: "empty", value: ptr(""), wantSet: true, wantErr: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]v1.Parameter{ParamValidUntilSeconds: "60"}
			if tc.value != nil {
				params[ParamMaxRunDurationSeconds] = *tc.value
			}
			got, set, err := ParseMaxRunDurationSeconds(params)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if got != tc.want || set != tc.wantSet {
				t.Errorf("ParseMaxRunDurationSeconds = %v, %v; want %v, %v", got, set, tc.want, tc.wantSet)
			}
		})
	}
	// The key is case-sensitive, as GKE's: another spelling is an unknown
	// parameter, ignored.
	if _, set, err := ParseMaxRunDurationSeconds(map[string]v1.Parameter{"MaxRunDurationSeconds": "x"}); set || err != nil {
		t.Errorf("another spelling: set=%v err=%v", set, err)
	}
}

func ptr(s string) *v1.Parameter {
	p := v1.Parameter(s)
	return &p
}
