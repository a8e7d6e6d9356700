package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// fuzzMaxPods is the --max-pods-per-provisioning-request of the fuzz
// target: small, so that a request the cap lets through is cheap to build.
const fuzzMaxPods = 300

// fitRecorder is a session in which every request fits; it keeps the pods
// it was asked about.
type fitRecorder struct {
	*cluster
	asked [][][]*apiv1.Pod
}

func (f *fitRecorder) FitAll(_ context.Context, sets [][]*apiv1.Pod, _ bool) (bool, string) {
	f.asked = append(f.asked, sets)
	return true, ""
}

// FuzzProvisioningRequest decodes a ProvisioningRequest and a PodTemplate
// from arbitrary JSON, as a user may write them, and runs one loop of the
// processor over them. It never panics, and the request ends as a model of
// the rules says: left alone when not ours, Failed when its parameters or
// PodSets are invalid or it asks for too many pods, waiting when a
// template is missing, and otherwise checked with exactly the pods it asks
// for, built from the template.
func FuzzProvisioningRequest(f *testing.F) {
	tmpl := `{"metadata":{"name":"t"},"template":{"metadata":{"labels":{"app":"x"},"annotations":{"a":"b"}},` +
		`"spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"1","memory":"1Gi"}}}]}}}`
	request := func(class, podSets, params string) string {
		return fmt.Sprintf(`{"metadata":{"name":"r"},"spec":{"provisioningClassName":%q,"podSets":%s,"parameters":%s}}`,
			class, podSets, params)
	}
	one := `[{"podTemplateRef":{"name":"t"},"count":3}]`
	for _, s := range [][2]string{
		{request(provreq.ClassCheckCapacity, one, `{}`), tmpl},
		{request(provreq.ClassBestEffortAtomicScaleUp, `[{"podTemplateRef":{"name":"t"},"count":1},{"podTemplateRef":{"name":"t"},"count":2}]`, `{"ValidUntilSeconds":"60","waitForReadyNodes":"true"}`), tmpl},
		{request(provreq.LegacyClassAtomicScaleUp, one, `{"noRetry":"false"}`), tmpl},
		{request(provreq.LegacyClassCheckCapacity, one, `{"noRetry":"TRUE","cloud.example.com/zone":"z"}`), tmpl},
		{request("queued-provisioning.gke.io", one, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{"processorInstance":"other"}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{"ValidUntilSeconds":"-1"}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{"ValidUntilSeconds":"99999999999999999999"}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{"ValidUntilSeconds":"0009223372036"}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{"noRetry":"maybe"}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{"waitForReadyNodes":"yes"}`), tmpl},
		{request(provreq.ClassCheckCapacity, `[{"podTemplateRef":{"name":"t"},"count":301}]`, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, `[{"podTemplateRef":{"name":"t"},"count":0}]`, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, `[{"podTemplateRef":{"name":"t"},"count":-2147483648},{"podTemplateRef":{"name":"t"},"count":2147483647}]`, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, `[]`, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, `[{"podTemplateRef":{},"count":1}]`, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, `[{"podTemplateRef":{"name":"gone"},"count":1}]`, `{}`), tmpl},
		{request(provreq.ClassCheckCapacity, one, `{}`), `{"metadata":{"name":"t"}}`},
		{request(provreq.ClassCheckCapacity, one, `{}`), `not json`},
		{`{"spec":{"podSets":null}}`, `{}`},
		{`{}`, `null`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, prJSON, tmplJSON []byte) {
		var pr v1.ProvisioningRequest
		if json.Unmarshal(prJSON, &pr) != nil {
			return // the API server refuses it
		}
		// What the API server sets, and a fresh status.
		pr.Namespace, pr.UID, pr.CreationTimestamp = "ns", "uid", metav1.NewTime(t0)
		if pr.Name == "" {
			pr.Name = "r"
		}
		pr.Status = v1.ProvisioningRequestStatus{}
		c := &cluster{requests: []*v1.ProvisioningRequest{&pr}, templates: map[string]*apiv1.PodTemplate{}}
		var tmpl apiv1.PodTemplate
		if json.Unmarshal(tmplJSON, &tmpl) == nil {
			tmpl.Namespace = "ns"
			c.templates["ns/"+tmpl.Name] = &tmpl
		}
		p := newTestProcessor(c, func(o *Options) { o.MaxPodsPerRequest = fuzzMaxPods })
		session := &fitRecorder{cluster: c}
		ctx := context.Background()
		l := p.Begin(ctx, Input{Now: t0.Add(time.Second)})
		l.Run(ctx, session, nil, c)
		l.Finish(ctx)

		conds := pr.Status.Conditions
		failed := provreq.FindCondition(conds, provreq.ConditionFailed)
		want := expectedOutcome(&pr, c.templates)
		switch {
		case want.untouched:
			if len(conds) != 0 || len(session.asked) != 0 {
				t.Fatalf("a request that is not ours got conditions %v and %d checks", conds, len(session.asked))
			}
			return
		case want.failReason != "":
			if failed == nil || failed.Status != metav1.ConditionTrue || failed.Reason != want.failReason {
				t.Fatalf("request %+v: Failed = %+v, want True/%s", pr.Spec, failed, want.failReason)
			}
			if len(session.asked) != 0 {
				t.Fatalf("a failed request was checked %d times", len(session.asked))
			}
			return
		case failed != nil:
			t.Fatalf("request %+v failed: %+v", pr.Spec, failed)
		case want.missing:
			if c := provreq.FindCondition(conds, provreq.ConditionProvisioned); c == nil || c.Reason != ReasonWaitingForPodTemplates {
				t.Fatalf("missing template: Provisioned = %+v, want WaitingForPodTemplates", c)
			}
			return
		}
		if c := provreq.FindCondition(conds, provreq.ConditionProvisioned); c == nil || c.Status != metav1.ConditionTrue {
			t.Fatalf("a valid request that fits: Provisioned = %+v", c)
		}
		if len(session.asked) != 1 {
			t.Fatalf("a valid request was checked %d times, want once", len(session.asked))
		}
		checkBuiltPods(t, &pr, &tmpl, session.asked[0])
	})
}

// outcome is what one loop should make of a fresh request.
type outcome struct {
	untouched  bool   // not this autoscaler's request
	failReason string // Failed=True with this reason
	missing    bool   // waiting for a PodTemplate
}

var decimal = regexp.MustCompile(`^[0-9]+$`)

// expectedOutcome is the model the fuzz target checks the processor
// against, written from the API's rules rather than from the code.
func expectedOutcome(pr *v1.ProvisioningRequest, templates map[string]*apiv1.PodTemplate) outcome {
	params := pr.Spec.Parameters
	if _, ok := provreq.NormalizeClass(pr.Spec.ProvisioningClassName); !ok || params[provreq.ParamProcessorInstance] != "" {
		return outcome{untouched: true}
	}
	if raw, ok := params[provreq.ParamValidUntilSeconds]; ok {
		n, isInt := new(big.Int).SetString(string(raw), 10)
		if !decimal.MatchString(string(raw)) || !isInt || n.Sign() <= 0 ||
			n.Cmp(big.NewInt(int64(time.Duration(1<<63-1)/time.Second))) > 0 {
			return outcome{failReason: ReasonInvalidParameters}
		}
	}
	for _, key := range []string{provreq.ParamNoRetry, ParamWaitForReadyNodes} {
		if raw, ok := params[key]; ok {
			if _, err := strconv.ParseBool(string(raw)); err != nil {
				return outcome{failReason: ReasonInvalidParameters}
			}
		}
	}
	sets := pr.Spec.PodSets
	if len(sets) == 0 || len(sets) > provreq.MaxPodSets {
		return outcome{failReason: ReasonInvalidPodSets}
	}
	total := int64(0)
	for _, ps := range sets {
		if ps.Count < 1 || ps.PodTemplateRef.Name == "" {
			return outcome{failReason: ReasonInvalidPodSets}
		}
		total += int64(ps.Count)
	}
	if total > fuzzMaxPods {
		return outcome{failReason: ReasonTooManyPods}
	}
	for _, ps := range sets {
		if templates[pr.Namespace+"/"+ps.PodTemplateRef.Name] == nil {
			return outcome{missing: true}
		}
	}
	return outcome{}
}

// checkBuiltPods: one group per PodSet, of its count, each pod a copy of
// the template owned by the request, with a name of its own.
func checkBuiltPods(t *testing.T, pr *v1.ProvisioningRequest, tmpl *apiv1.PodTemplate, sets [][]*apiv1.Pod) {
	t.Helper()
	if len(sets) != len(pr.Spec.PodSets) {
		t.Fatalf("%d groups of pods for %d PodSets", len(sets), len(pr.Spec.PodSets))
	}
	names := map[string]bool{}
	uids := map[types.UID]bool{}
	for i, ps := range pr.Spec.PodSets {
		if len(sets[i]) != int(ps.Count) {
			t.Fatalf("PodSet %d asks for %d pods, got %d", i, ps.Count, len(sets[i]))
		}
		for _, pod := range sets[i] {
			if names[pod.Name] || uids[pod.UID] {
				t.Fatalf("pod %s (%s) built twice", pod.Name, pod.UID)
			}
			names[pod.Name], uids[pod.UID] = true, true
			if pod.Namespace != pr.Namespace || pod.Spec.NodeName != "" ||
				!equality.Semantic.DeepEqual(pod.Spec, tmpl.Template.Spec) ||
				!equality.Semantic.DeepEqual(pod.Labels, tmpl.Template.Labels) {
				t.Fatalf("pod %s is not a pending copy of its template", pod.Name)
			}
			if name, ok := provreq.ConsumedRequestName(pod); !ok || name != pr.Name {
				t.Fatalf("pod %s consumes %q, want %q", pod.Name, name, pr.Name)
			}
			for k, v := range tmpl.Template.Annotations {
				if k != provreq.ConsumeAnnotation && k != provreq.ClassAnnotation && pod.Annotations[k] != v {
					t.Fatalf("pod %s lost the template's annotation %s", pod.Name, k)
				}
			}
			if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != pr.UID {
				t.Fatalf("pod %s is owned by %v", pod.Name, pod.OwnerReferences)
			}
		}
	}
}
