package aws

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/go-logr/logr"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// replayer answers the SDK's requests in memory: the fuzzed bodies for
// DescribeAutoScalingGroups (first page) and DescribeInstanceTypes, fixed
// valid replies for the rest.
type replayer struct {
	mu        sync.Mutex
	asgBody   string
	typesBody string
	asgCalls  int
}

const asgNS = `xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"`
const ec2NS = `xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"`

func (r *replayer) Do(req *http.Request) (*http.Response, error) {
	b, _ := io.ReadAll(req.Body)
	body := string(b)
	action := ""
	for _, kv := range strings.Split(body, "&") {
		if v, ok := strings.CutPrefix(kv, "Action="); ok {
			action = v
		}
	}
	r.mu.Lock()
	var out string
	switch action {
	case "DescribeAutoScalingGroups":
		r.asgCalls++
		if r.asgCalls%2 == 1 {
			out = r.asgBody
		} else {
			out = `<DescribeAutoScalingGroupsResponse ` + asgNS + `><DescribeAutoScalingGroupsResult><AutoScalingGroups/></DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>`
		}
	case "DescribeScalingActivities":
		out = `<DescribeScalingActivitiesResponse ` + asgNS + `><DescribeScalingActivitiesResult><Activities><member><ActivityId>a</ActivityId><AutoScalingGroupName>x</AutoScalingGroupName><Cause>c</Cause><StartTime>2026-01-01T00:00:00Z</StartTime><StatusCode>Failed</StatusCode><StatusMessage>InsufficientInstanceCapacity</StatusMessage></member></Activities></DescribeScalingActivitiesResult></DescribeScalingActivitiesResponse>`
	case "DescribeLaunchConfigurations":
		out = `<DescribeLaunchConfigurationsResponse ` + asgNS + `><DescribeLaunchConfigurationsResult><LaunchConfigurations/></DescribeLaunchConfigurationsResult></DescribeLaunchConfigurationsResponse>`
	case "DescribeInstanceTypes":
		out = r.typesBody
	case "DescribeLaunchTemplateVersions":
		out = `<DescribeLaunchTemplateVersionsResponse ` + ec2NS + `><launchTemplateVersionSet><item><versionNumber>1</versionNumber><launchTemplateData><instanceType>m5.large</instanceType></launchTemplateData></item></launchTemplateVersionSet></DescribeLaunchTemplateVersionsResponse>`
	case "GetInstanceTypesFromInstanceRequirements":
		out = `<GetInstanceTypesFromInstanceRequirementsResponse ` + ec2NS + `><instanceTypeSet><item><instanceType>m5.large</instanceType></item>` +
			`<item><instanceType>g4dn.xlarge</instanceType></item></instanceTypeSet></GetInstanceTypesFromInstanceRequirementsResponse>`
	case "DescribeImages":
		out = `<DescribeImagesResponse ` + ec2NS + `><imagesSet><item><imageId>ami-1</imageId><architecture>x86_64</architecture></item></imagesSet></DescribeImagesResponse>`
	case "DescribeSubnets":
		out = `<DescribeSubnetsResponse ` + ec2NS + `><subnetSet><item><subnetId>subnet-a</subnetId><availabilityZone>us-east-1a</availabilityZone></item></subnetSet></DescribeSubnetsResponse>`
	default:
		out = `<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction</Code><Message>no</Message></Error></ErrorResponse>`
		r.mu.Unlock()
		return &http.Response{StatusCode: 400, Header: http.Header{"Content-Type": {"text/xml"}}, Body: io.NopCloser(strings.NewReader(out)), Request: req}, nil
	}
	r.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/xml"}},
		Body: io.NopCloser(bytes.NewReader([]byte(out))), Request: req}, nil
}

func replayProvider(r *replayer) *Provider {
	creds := credentials.NewStaticCredentialsProvider("AKIDFUZZ", "secret", "")
	a := autoscaling.New(autoscaling.Options{Region: "us-east-1", HTTPClient: r, Credentials: creds,
		BaseEndpoint: aws.String("http://127.0.0.1:1"), RetryMaxAttempts: 1})
	e := ec2.New(ec2.Options{Region: "us-east-1", HTTPClient: r, Credentials: creds,
		BaseEndpoint: aws.String("http://127.0.0.1:1"), RetryMaxAttempts: 1})
	d, _ := parseDiscoverer("asg:tag=k8s.io/cluster-autoscaler/enabled")
	return New(a, e, "us-east-1", nil, []tagDiscoverer{d})
}

const seedASG = `<DescribeAutoScalingGroupsResponse ` + asgNS + `><DescribeAutoScalingGroupsResult><AutoScalingGroups>
<member><AutoScalingGroupName>ng-1</AutoScalingGroupName><MinSize>0</MinSize><MaxSize>10</MaxSize><DesiredCapacity>3</DesiredCapacity>
<AvailabilityZones><member>us-east-1a</member></AvailabilityZones><VPCZoneIdentifier>subnet-a</VPCZoneIdentifier>
<LaunchTemplate><LaunchTemplateId>lt-1</LaunchTemplateId><Version>$Latest</Version></LaunchTemplate>
<Instances><member><InstanceId>i-0123456789abcdef0</InstanceId><AvailabilityZone>us-east-1a</AvailabilityZone><LifecycleState>InService</LifecycleState><InstanceType>m5.large</InstanceType></member></Instances>
<Tags><member><Key>k8s.io/cluster-autoscaler/enabled</Key><Value>true</Value></member>
<member><Key>k8s.io/cluster-autoscaler/node-template/label/team</Key><Value>ml</Value></member>
<member><Key>k8s.io/cluster-autoscaler/node-template/taint/dedicated</Key><Value>ml:NoSchedule</Value></member>
<member><Key>k8s.io/cluster-autoscaler/node-template/resources/ephemeral-storage</Key><Value>100Gi</Value></member>
<member><Key>k8s.io/cluster-autoscaler/autoscaling-options/scaledownunneededtime</Key><Value>5m</Value></member></Tags>
</member>
<member><AutoScalingGroupName>mixed</AutoScalingGroupName><MinSize>1</MinSize><MaxSize>5</MaxSize><DesiredCapacity>1</DesiredCapacity>
<MixedInstancesPolicy><LaunchTemplate><LaunchTemplateSpecification><LaunchTemplateName>lt</LaunchTemplateName></LaunchTemplateSpecification>
<Overrides><member><InstanceType>g4dn.xlarge</InstanceType></member></Overrides></LaunchTemplate></MixedInstancesPolicy>
<Tags><member><Key>k8s.io/cluster-autoscaler/enabled</Key><Value>true</Value></member></Tags></member>
</AutoScalingGroups><NextToken>next</NextToken></DescribeAutoScalingGroupsResult></DescribeAutoScalingGroupsResponse>`

const seedTypes = `<DescribeInstanceTypesResponse ` + ec2NS + `><instanceTypeSet>
<item><instanceType>m5.large</instanceType><vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>8192</sizeInMiB></memoryInfo>
<processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo>
<networkInfo><maximumNetworkInterfaces>3</maximumNetworkInterfaces><ipv4AddressesPerInterface>10</ipv4AddressesPerInterface></networkInfo></item>
<item><instanceType>g4dn.xlarge</instanceType><vCpuInfo><defaultVCpus>4</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo>
<gpuInfo><gpus><item><count>1</count><manufacturer>NVIDIA</manufacturer><name>T4</name></item></gpus></gpuInfo></item>
</instanceTypeSet></DescribeInstanceTypesResponse>`

// seedASGRequirements is seedASG with the mixed group's override turned
// into InstanceRequirements (the replayer answers m5.large and g4dn.xlarge).
func seedASGRequirements() string {
	return strings.ReplaceAll(seedASG, "<member><InstanceType>g4dn.xlarge</InstanceType></member>",
		"<member><InstanceRequirements><VCpuCount><Min>2</Min><Max>4</Max></VCpuCount><MemoryMiB><Min>1024</Min></MemoryMiB>"+
			"<AcceleratorTypes><member>gpu</member></AcceleratorTypes></InstanceRequirements></member>")
}

// FuzzDescribeReplies feeds arbitrary DescribeAutoScalingGroups and
// DescribeInstanceTypes replies through the real SDK into the provider:
// it must never panic, and what it makes of them must hold together.
func FuzzDescribeReplies(f *testing.F) {
	f.Add(seedASG, seedTypes)
	f.Add(strings.ReplaceAll(seedASG, "<DesiredCapacity>3<", "<DesiredCapacity>-3<"), seedTypes)
	f.Add(strings.ReplaceAll(seedASG, "<MaxSize>10<", "<MaxSize>1<"), strings.ReplaceAll(seedTypes, ">8192<", ">-1<"))
	f.Add(strings.ReplaceAll(seedASG, "ml:NoSchedule", "ml"), seedTypes)
	f.Add(`<x/>`, `not xml`)
	f.Add(seedASGRequirements(), seedTypes)
	f.Fuzz(func(t *testing.T, asgBody, typesBody string) {
		ctx := klog.NewContext(context.Background(), logr.Discard())
		p := replayProvider(&replayer{asgBody: asgBody, typesBody: typesBody})
		if err := p.Refresh(ctx); err != nil {
			return
		}
		groups, _ := p.NodeGroups(ctx)
		for _, ng := range groups {
			g := ng.(*NodeGroup)
			if g.MinSize() < 0 || g.MaxSize() < g.MinSize() {
				t.Fatalf("group %q has min %d max %d", g.Id(), g.MinSize(), g.MaxSize())
			}
			target, _ := g.TargetSize(ctx)
			ins, _ := g.Nodes(ctx)
			seen := map[string]bool{}
			live := 0
			for _, in := range ins {
				if seen[in.Id] || !strings.HasPrefix(in.Id, providerIDPrefix) {
					t.Fatalf("group %q lists instance %q twice or with a bad provider id", g.Id(), in.Id)
				}
				seen[in.Id] = true
				if in.Status.State != cloudprovider.InstanceDeleting {
					live++
				}
				if got, _ := p.NodeGroupForNode(ctx, &apiv1.Node{Spec: apiv1.NodeSpec{ProviderID: in.Id}}); got != ng {
					t.Fatalf("instance %q is not found in its group %q", in.Id, g.Id())
				}
			}
			if live < target {
				t.Fatalf("group %q: %d live instances and placeholders for target %d", g.Id(), live, target)
			}
			info, err := g.TemplateNodeInfo(ctx)
			if err == nil {
				for r, q := range info.Node.Status.Capacity {
					if q.Sign() < 0 {
						t.Fatalf("template of %q has %s %s", g.Id(), r, q.String())
					}
				}
			}
			_, _ = g.GetOptions(ctx, config.NodeGroupAutoscalingOptions{})
		}
	})
}

// TestReplaySeed checks that the fuzz seed is understood, so that the
// fuzzer starts from replies that reach the templates.
func TestReplaySeed(t *testing.T) {
	ctx := context.Background()
	p := replayProvider(&replayer{asgBody: seedASG, typesBody: seedTypes})
	if err := p.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.current().order; len(got) != 2 {
		t.Fatalf("groups %v, want ng-1 and mixed", got)
	}
	g := p.current().groups["ng-1"]
	ins, _ := g.Nodes(ctx)
	_, _, failed := states(ins)
	if len(ins) != 3 || failed != 2 {
		t.Errorf("ng-1: %d instances, %d failed placeholders; want 3 and 2", len(ins), failed)
	}
	for _, name := range []string{"ng-1", "mixed"} {
		info, err := p.current().groups[name].TemplateNodeInfo(ctx)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "mixed" && info.Node.Labels[apiv1.LabelInstanceTypeStable] != "g4dn.xlarge" {
			t.Errorf("mixed: instance type %q", info.Node.Labels[apiv1.LabelInstanceTypeStable])
		}
	}
}
