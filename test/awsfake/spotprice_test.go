package awsfake

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDescribeSpotPriceHistory(t *testing.T) {
	s := startFake(t)
	now := time.Now().UTC().Truncate(time.Second)
	for _, p := range []SpotPrice{
		{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.040, At: now.Add(-3 * time.Hour)},
		{InstanceType: "m5.large", Zone: "us-east-1a", Price: 0.035, At: now.Add(-2 * time.Hour)},
		{InstanceType: "m5.large", Zone: "us-east-1b", Price: 0.038, At: now.Add(-5 * time.Hour)},
		{InstanceType: "m5.large", Zone: "us-east-1b", Product: "Windows", Price: 0.12, At: now.Add(-time.Hour)},
		{InstanceType: "c5.xlarge", Zone: "us-east-1a", Price: 0.07, At: now.Add(-time.Minute)},
	} {
		s.AddSpotPrice(p)
	}
	c := sdkClients(t, s)
	type key struct{ typ, zone string }
	read := func(in *ec2.DescribeSpotPriceHistoryInput) (map[key]string, int) {
		t.Helper()
		got := map[key]string{}
		n := 0
		pages := ec2.NewDescribeSpotPriceHistoryPaginator(c.ec2, in)
		for pages.HasMorePages() {
			out, err := pages.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n += len(out.SpotPriceHistory)
			for _, h := range out.SpotPriceHistory {
				k := key{string(h.InstanceType), aws.ToString(h.AvailabilityZone)}
				if _, seen := got[k]; !seen { // newest first
					got[k] = aws.ToString(h.SpotPrice)
				}
			}
		}
		return got, n
	}
	// From now on: the price in effect now, per type and zone.
	got, n := read(&ec2.DescribeSpotPriceHistoryInput{StartTime: aws.Time(now), ProductDescriptions: []string{"Linux/UNIX"},
		InstanceTypes: []ec2types.InstanceType{"m5.large"}, MaxResults: aws.Int32(1)})
	want := map[key]string{{"m5.large", "us-east-1a"}: "0.035000", {"m5.large", "us-east-1b"}: "0.038000"}
	if n != 2 || len(got) != 2 || got[key{"m5.large", "us-east-1a"}] != want[key{"m5.large", "us-east-1a"}] || got[key{"m5.large", "us-east-1b"}] != want[key{"m5.large", "us-east-1b"}] {
		t.Errorf("current prices %v (%d entries), want %v in 2", got, n, want)
	}
	// The whole history, filtered by zone.
	got, n = read(&ec2.DescribeSpotPriceHistoryInput{Filters: []ec2types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-east-1a"}}}})
	if n != 3 || got[key{"m5.large", "us-east-1a"}] != "0.035000" || got[key{"c5.xlarge", "us-east-1a"}] != "0.070000" {
		t.Errorf("history of us-east-1a: %v (%d entries), want 3 entries, newest first", got, n)
	}
	if _, err := c.ec2.DescribeSpotPriceHistory(t.Context(), &ec2.DescribeSpotPriceHistoryInput{
		Filters: []ec2types.Filter{{Name: aws.String("spot-price-bogus"), Values: []string{"1"}}}}); apiErrorCode(err) != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v, want InvalidParameterValue", err)
	}
}
