package chart_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiv1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// roleARNAnnotation is the service account annotation EKS's pod identity
// webhook reads for IRSA.
const roleARNAnnotation = "eks.amazonaws.com/role-arn"

// awsIRSAValuesFile is an upstream-style AWS values file with an IRSA role.
const awsIRSAValuesFile = "testdata/aws-irsa-values.yaml"

// faqIAM is what FAQ.md's "The IAM role: IRSA and EKS Pod Identity" says,
// read from its code blocks.
type faqIAM struct {
	release, namespace string
	sets               []string // the helm install command's --set arguments
	irsaTrust          trustPolicy
	podIdentityTrust   trustPolicy
	association        map[string]string // create-pod-identity-association's options
}

type trustPolicy struct {
	Statement []struct {
		Effect    string
		Principal map[string]string
		Action    any // a string or a list of strings
		Condition map[string]map[string]string
	}
}

func (p trustPolicy) actions(t *testing.T) []string {
	t.Helper()
	if len(p.Statement) != 1 {
		t.Fatalf("trust policy with %d statements, want 1", len(p.Statement))
	}
	switch a := p.Statement[0].Action.(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, v := range a {
			out = append(out, v.(string))
		}
		return out
	}
	t.Fatalf("trust policy action %v", p.Statement[0].Action)
	return nil
}

// readFAQIAM parses the FAQ's subsection: the helm install command, the two
// trust policies and the Pod Identity association.
func readFAQIAM(t *testing.T) faqIAM {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "FAQ.md"))
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n### The IAM role: IRSA and EKS Pod Identity\n"
	_, section, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("FAQ.md has no %q", strings.TrimSpace(heading))
	}
	if i := regexp.MustCompile(`\n##+ `).FindStringIndex(section); i != nil {
		section = section[:i[0]]
	}
	var f faqIAM
	for _, block := range codeBlocks(section) {
		switch {
		case strings.Contains(block, "helm install"):
			words := shellWords(block)
			if len(words) < 4 || words[3] != chartDir {
				t.Fatalf("FAQ helm command %q does not install %s", block, chartDir)
			}
			f.release = words[2]
			for i := 4; i+1 < len(words); i++ {
				switch words[i] {
				case "--namespace", "-n":
					f.namespace = words[i+1]
				case "--set":
					f.sets = append(f.sets, "--set", words[i+1])
				}
			}
		case strings.Contains(block, "create-pod-identity-association"):
			words := shellWords(block)
			f.association = map[string]string{}
			for i, w := range words {
				if strings.HasPrefix(w, "--") && i+1 < len(words) {
					f.association[strings.TrimPrefix(w, "--")] = words[i+1]
				}
			}
		case strings.Contains(block, "AssumeRoleWithWebIdentity"):
			if err := json.Unmarshal([]byte(block), &f.irsaTrust); err != nil {
				t.Fatalf("FAQ IRSA trust policy: %v\n%s", err, block)
			}
		case strings.Contains(block, "pods.eks.amazonaws.com"):
			if err := json.Unmarshal([]byte(block), &f.podIdentityTrust); err != nil {
				t.Fatalf("FAQ Pod Identity trust policy: %v\n%s", err, block)
			}
		}
	}
	if f.release == "" || f.namespace == "" || f.association == nil || f.irsaTrust.Statement == nil || f.podIdentityTrust.Statement == nil {
		t.Fatalf("FAQ's IAM role section lacks a code block: %+v", f)
	}
	return f
}

// codeBlocks returns the fenced code blocks of markdown text, dedented by
// their fence's indentation.
func codeBlocks(text string) []string {
	var blocks []string
	var cur []string
	indent, in := "", false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if strings.HasPrefix(trimmed, "```") {
			if in {
				blocks = append(blocks, strings.Join(cur, "\n"))
				cur, in = nil, false
			} else {
				indent, in = line[:len(line)-len(trimmed)], true
			}
			continue
		}
		if in {
			cur = append(cur, strings.TrimPrefix(line, indent))
		}
	}
	return blocks
}

// shellWords splits a command as the shell would for the FAQ's commands:
// continuation lines joined, words split on blanks, double quotes removed.
func shellWords(cmd string) []string {
	cmd = strings.ReplaceAll(cmd, "\\\n", " ")
	return strings.Fields(strings.ReplaceAll(cmd, `"`, ""))
}

// serviceAccountOf returns the Deployment's service account and the
// rendered ServiceAccount of that name, failing when the chart renders none.
func serviceAccountOf(t *testing.T, m manifest) (*appsv1.Deployment, *apiv1.ServiceAccount) {
	t.Helper()
	d, _ := m.deployment(t)
	name := d.Spec.Template.Spec.ServiceAccountName
	for _, o := range m.all("ServiceAccount") {
		if o.GetName() == name {
			sa := &apiv1.ServiceAccount{}
			convert(t, o, sa)
			return d, sa
		}
	}
	t.Fatalf("the Deployment runs as service account %q, which the chart does not render", name)
	return nil, nil
}

// TestIRSATrustPolicyNamesTheChartsServiceAccount: the FAQ's helm command
// renders a Deployment running as the service account that carries the
// role, and that service account is the subject the FAQ's IRSA trust policy
// requires and the one its Pod Identity association names. On the local
// API server, the token Kubernetes issues that service account for the
// FAQ's audience carries exactly the sub and aud the trust policy checks.
func TestIRSATrustPolicyNamesTheChartsServiceAccount(t *testing.T) {
	f := readFAQIAM(t)
	m := render(t, f.release, f.namespace, "", f.sets...)
	d, sa := serviceAccountOf(t, m)
	roleARN := sa.Annotations[roleARNAnnotation]
	if roleARN == "" || sa.Namespace != f.namespace || d.Namespace != f.namespace {
		t.Fatalf("service account %s/%s annotations %v (Deployment in %s): want the role in %s", sa.Namespace, sa.Name,
			sa.Annotations, d.Namespace, f.namespace)
	}
	subject := "system:serviceaccount:" + f.namespace + ":" + sa.Name

	// IRSA: the OIDC provider is the principal, and the conditions on its
	// issuer's sub and aud name this service account and STS.
	st := f.irsaTrust.Statement[0]
	if got := f.irsaTrust.actions(t); st.Effect != "Allow" || !slices.Equal(got, []string{"sts:AssumeRoleWithWebIdentity"}) {
		t.Errorf("IRSA trust policy: effect %s, actions %v", st.Effect, got)
	}
	_, issuer, ok := strings.Cut(st.Principal["Federated"], ":oidc-provider/")
	if !ok || issuer == "" {
		t.Fatalf("IRSA trust policy principal %v: not an OIDC provider", st.Principal)
	}
	cond := st.Condition["StringEquals"]
	if got := cond[issuer+":sub"]; got != subject {
		t.Errorf("IRSA trust policy requires sub %q; the chart's Deployment runs as %s", got, subject)
	}
	aud := cond[issuer+":aud"]
	if aud != "sts.amazonaws.com" || len(cond) != 2 {
		t.Errorf("IRSA trust policy conditions %v: want exactly %s:sub and %s:aud = sts.amazonaws.com", cond, issuer, issuer)
	}

	// EKS Pod Identity: the service principal may assume and tag; the
	// association names the same namespace, service account and role.
	pst := f.podIdentityTrust.Statement[0]
	if got := f.podIdentityTrust.actions(t); pst.Principal["Service"] != "pods.eks.amazonaws.com" ||
		!slices.Contains(got, "sts:AssumeRole") || !slices.Contains(got, "sts:TagSession") {
		t.Errorf("Pod Identity trust policy: principal %v, actions %v", pst.Principal, got)
	}
	for key, want := range map[string]string{"namespace": f.namespace, "service-account": sa.Name, "role-arn": roleARN} {
		if got := f.association[key]; got != want {
			t.Errorf("create-pod-identity-association --%s %q, want %q", key, got, want)
		}
	}

	// The chart's own RBAC binds the same service account.
	var crb rbacv1.ClusterRoleBinding
	m.one(t, "ClusterRoleBinding", &crb)
	if len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa.Name || crb.Subjects[0].Namespace != f.namespace {
		t.Errorf("ClusterRoleBinding subjects %+v, want %s/%s", crb.Subjects, f.namespace, sa.Name)
	}

	// The same release on the local API server: the service account exists
	// as rendered, the Deployment is admitted with it, and a token issued
	// to it for the trust policy's audience has the subject the policy
	// requires (with the test's namespace for the FAQ's).
	env := framework.New(t)
	m = render(t, f.release, env.Namespace, "", f.sets...)
	d, sa = serviceAccountOf(t, m)
	ctx := env.Context()
	if _, err := env.Client.CoreV1().ServiceAccounts(env.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.AppsV1().Deployments(env.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := env.Client.CoreV1().ServiceAccounts(env.Namespace).CreateToken(ctx, d.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{aud}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwtClaims(t, tr.Status.Token)
	wantSub := strings.Replace(cond[issuer+":sub"], ":"+f.namespace+":", ":"+env.Namespace+":", 1)
	if claims.Sub != wantSub || !slices.Equal(claims.Aud, []string{aud}) {
		t.Errorf("token of %s/%s: sub %q aud %v; the trust policy requires sub %q and aud %q",
			env.Namespace, d.Spec.Template.Spec.ServiceAccountName, claims.Sub, claims.Aud, wantSub, aud)
	}
}

type tokenClaims struct {
	Sub string   `json:"sub"`
	Aud []string `json:"aud"`
}

// jwtClaims decodes a JWT's payload (the signature is the API server's
// business, not this test's).
func jwtClaims(t *testing.T, token string) tokenClaims {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token with %d parts", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c tokenClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatalf("token payload %s: %v", payload, err)
	}
	return c
}

// TestAWSValuesFileWithIRSA renders an upstream-style AWS values file, as
// EKS users of upstream's chart write it, unchanged: the aws provider with
// its discovery tags, groups and region, the user's image and pod
// annotations, no static key (it would take precedence over the role), and
// the Deployment running as the annotated service account. The service
// account's name, which the role's trust policy names, follows upstream's
// chart for each naming value.
func TestAWSValuesFileWithIRSA(t *testing.T) {
	values, err := os.ReadFile(awsIRSAValuesFile)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "kube-system"
	m := render(t, "cluster-autoscaler", ns, string(values))
	d, c := m.deployment(t)
	checkArgsParse(t, c.Args)
	for _, want := range []string{"--cloud-provider=aws", "--nodes=0:4:gpu-nodes",
		"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,k8s.io/cluster-autoscaler/my-cluster",
		"--balance-similar-node-groups=true", "--skip-nodes-with-system-pods=false", "--expander=least-waste",
		"--balancing-ignore-label=topology.ebs.csi.aws.com/zone"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	if v, _ := envOf(c, "AWS_REGION"); v != "us-east-1" {
		t.Errorf("AWS_REGION = %q, want us-east-1", v)
	}
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"} {
		if v, ok := envOf(c, name); ok {
			t.Errorf("env %s = %q: the credential chain must be left to the role (EKS injects IRSA's variables)", name, v)
		}
	}
	if c.Image != "111122223333.dkr.ecr.us-east-1.amazonaws.com/cluster-autoscaler:v1.35.0" ||
		d.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "false" {
		t.Errorf("image %q, pod annotations %v", c.Image, d.Spec.Template.Annotations)
	}
	if len(m.all("Secret")) != 0 {
		t.Error("a Secret rendered without a static key")
	}

	for name, tc := range map[string]struct {
		release string
		flags   []string
		want    string
	}{
		"release":                      {release: "cluster-autoscaler", want: "cluster-autoscaler-aws-cluster-autoscaler"},
		"release named as the chart":   {release: "aws-cluster-autoscaler", want: "aws-cluster-autoscaler"},
		"fullnameOverride":             {release: "ca", flags: []string{"--set", "fullnameOverride=cluster-autoscaler"}, want: "cluster-autoscaler"},
		"nameOverride":                 {release: "ops", flags: []string{"--set", "nameOverride=autoscaler"}, want: "ops-autoscaler"},
		"rbac.serviceAccount.name":     {release: "ca", flags: []string{"--set", "rbac.serviceAccount.name=cluster-autoscaler"}, want: "cluster-autoscaler"},
		"long release cut to 63":       {release: "platform-team-production-eu-west-1-autoscaling", want: "platform-team-production-eu-west-1-autoscaling-aws-cluster-auto"},
		"cut before a trailing hyphen": {release: "platform-team-production-eu-west-1-autoscaling-ca1", want: "platform-team-production-eu-west-1-autoscaling-ca1-aws-cluster"},
	} {
		t.Run(name, func(t *testing.T) {
			m := render(t, tc.release, ns, string(values), tc.flags...)
			d, sa := serviceAccountOf(t, m)
			if sa.Name != tc.want {
				t.Errorf("the Deployment runs as %s, want %s (the subject system:serviceaccount:%s:%s)", sa.Name, tc.want, ns, tc.want)
			}
			if sa.Annotations[roleARNAnnotation] != "arn:aws:iam::111122223333:role/ca" || sa.Namespace != ns || d.Namespace != ns {
				t.Errorf("service account %s/%s annotations %v: not the role of the values file", sa.Namespace, sa.Name, sa.Annotations)
			}
			if len(m.all("ServiceAccount")) != 1 {
				t.Errorf("%d ServiceAccounts rendered, want 1", len(m.all("ServiceAccount")))
			}
		})
	}

	// A service account made outside the chart with its role (eksctl create
	// iamserviceaccount): the Deployment runs as it, the chart's bindings
	// name it, and the chart renders no other.
	m = render(t, "ca", ns, string(values), "--set", "rbac.serviceAccount.create=false",
		"--set", "rbac.serviceAccount.name=cluster-autoscaler")
	d, _ = m.deployment(t)
	var crb rbacv1.ClusterRoleBinding
	m.one(t, "ClusterRoleBinding", &crb)
	if got := d.Spec.Template.Spec.ServiceAccountName; got != "cluster-autoscaler" || len(m.all("ServiceAccount")) != 0 ||
		len(crb.Subjects) != 1 || crb.Subjects[0].Name != got || crb.Subjects[0].Namespace != ns {
		t.Errorf("existing service account: the Deployment runs as %q, %d rendered, bound subjects %+v",
			got, len(m.all("ServiceAccount")), crb.Subjects)
	}
}
