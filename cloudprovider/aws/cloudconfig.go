package aws

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/klog/v2"
)

// The --cloud-config file of the aws provider is upstream's: the INI-like
// (gcfg) file of the legacy AWS cloud provider, of which the autoscaler acts
// on the endpoint overrides only:
//
//	[Global]
//	Zone = us-east-1a            ; read by the legacy cloud provider; ignored here
//
//	[ServiceOverride "1"]
//	Service = autoscaling
//	Region = us-east-1
//	URL = https://autoscaling.example.internal
//	SigningRegion = us-east-1
//
// An override applies to the client of its Service (autoscaling, ec2, or
// any other the provider calls) when its Region is the provider's region:
// the calls go to URL, signed for SigningRegion.

// serviceOverride is one [ServiceOverride "<n>"] section.
type serviceOverride struct {
	Name                                string // the section's subsection, for messages
	Service, Region, URL, SigningRegion string
	SigningMethod, SigningName          string
}

// cloudConfig is what the --cloud-config file says.
type cloudConfig struct {
	Overrides []serviceOverride
	// Ignored are the [Global] keys given: the autoscaler does not use them.
	Ignored []string
}

// readCloudConfig reads and checks the --cloud-config file; "" is no file.
func readCloudConfig(path string) (cloudConfig, error) {
	if path == "" {
		return cloudConfig{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return cloudConfig{}, fmt.Errorf("--cloud-config: %w", err)
	}
	defer func() { _ = f.Close() }()
	cc, err := parseCloudConfig(f)
	if err != nil {
		return cloudConfig{}, fmt.Errorf("--cloud-config %s: %w", path, err)
	}
	return cc, nil
}

// parseCloudConfig parses the file: sections [Global] and
// [ServiceOverride "<n>"], lines "Key = value" (names without regard to
// case; values trimmed, optionally double-quoted), comments after ; or #.
func parseCloudConfig(r io.Reader) (cloudConfig, error) {
	var cc cloudConfig
	var section string
	var cur *serviceOverride
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := stripComment(strings.TrimSpace(sc.Text()))
		if text == "" {
			continue
		}
		if strings.HasPrefix(text, "[") {
			name, sub, err := parseSectionHeader(text)
			if err != nil {
				return cc, fmt.Errorf("line %d: %w", line, err)
			}
			section, cur = strings.ToLower(name), nil
			switch section {
			case "global":
			case "serviceoverride":
				if sub == "" {
					return cc, fmt.Errorf("line %d: [ServiceOverride] needs a name: [ServiceOverride \"1\"]", line)
				}
				cc.Overrides = append(cc.Overrides, serviceOverride{Name: sub})
				cur = &cc.Overrides[len(cc.Overrides)-1]
			default:
				return cc, fmt.Errorf("line %d: unknown section [%s] (want [Global] or [ServiceOverride \"<n>\"])", line, name)
			}
			continue
		}
		key, value, _ := strings.Cut(text, "=")
		key, value = strings.TrimSpace(key), unquote(strings.TrimSpace(value))
		switch {
		case section == "":
			return cc, fmt.Errorf("line %d: %q is outside any section", line, key)
		case section == "global":
			cc.Ignored = append(cc.Ignored, key)
		default:
			if err := cur.set(key, value); err != nil {
				return cc, fmt.Errorf("line %d: [ServiceOverride %q]: %w", line, cur.Name, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return cc, err
	}
	return cc, cc.validate()
}

func (o *serviceOverride) set(key, value string) error {
	switch strings.ToLower(key) {
	case "service":
		o.Service = value
	case "region":
		o.Region = value
	case "url":
		o.URL = value
	case "signingregion":
		o.SigningRegion = value
	case "signingmethod":
		o.SigningMethod = value
	case "signingname":
		o.SigningName = value
	default:
		return fmt.Errorf("unknown key %q (want Service, Region, URL, SigningRegion, SigningMethod, SigningName)", key)
	}
	return nil
}

// validate checks the overrides as upstream does: Service, Region, URL and
// SigningRegion given, one override per service and region.
func (cc cloudConfig) validate() error {
	seen := map[string]string{}
	for _, o := range cc.Overrides {
		for _, f := range []struct{ name, v string }{{"Service", o.Service}, {"Region", o.Region}, {"URL", o.URL}, {"SigningRegion", o.SigningRegion}} {
			if f.v == "" {
				return fmt.Errorf("[ServiceOverride %q]: %s is missing", o.Name, f.name)
			}
		}
		key := strings.ToLower(o.Service) + " " + o.Region
		if prev, dup := seen[key]; dup {
			return fmt.Errorf("[ServiceOverride %q] and [ServiceOverride %q] both override %s in %s", prev, o.Name, o.Service, o.Region)
		}
		seen[key] = o.Name
	}
	return nil
}

// override returns the override of service in region, if any.
func (cc cloudConfig) override(service, region string) (serviceOverride, bool) {
	for _, o := range cc.Overrides {
		if strings.EqualFold(o.Service, service) && o.Region == region {
			return o, true
		}
	}
	return serviceOverride{}, false
}

// logIgnored says at start-up what of the file is not acted on.
func (cc cloudConfig) logIgnored(ctx context.Context, region string) {
	logger := klog.FromContext(ctx)
	if len(cc.Ignored) > 0 {
		keys := append([]string(nil), cc.Ignored...)
		sort.Strings(keys)
		logger.Info("--cloud-config: [Global] settings are read by the legacy AWS cloud provider, not by the autoscaler; ignored", "keys", keys)
	}
	for _, o := range cc.Overrides {
		switch {
		case !strings.EqualFold(o.Service, "autoscaling") && !strings.EqualFold(o.Service, "ec2") && !strings.EqualFold(o.Service, "eks"):
			logger.V(2).Info("--cloud-config: endpoint override of a service the provider does not call", "override", o.Name, "service", o.Service)
		case o.Region != region:
			logger.Info("--cloud-config: endpoint override for another region; not applied", "override", o.Name, "service", o.Service,
				"overrideRegion", o.Region, "region", region)
		default:
			logger.Info("--cloud-config: endpoint override", "service", o.Service, "url", o.URL, "signingRegion", o.SigningRegion)
		}
		if (o.SigningMethod != "" && !strings.EqualFold(o.SigningMethod, "v4")) || o.SigningName != "" {
			logger.Info("WARNING: --cloud-config: SigningMethod and SigningName are not applied; calls are signed with SigV4 under the service's own name",
				"override", o.Name, "signingMethod", o.SigningMethod, "signingName", o.SigningName)
		}
	}
}

// newClientsWith builds the SDK clients from cfg with the endpoint
// overrides of cc for cfg's region.
func newClientsWith(cfg aws.Config, cc cloudConfig) (AutoScalingAPI, EC2API) {
	var asgOpts []func(*autoscaling.Options)
	if o, ok := cc.override("autoscaling", cfg.Region); ok {
		asgOpts = append(asgOpts, func(opts *autoscaling.Options) {
			opts.BaseEndpoint, opts.Region = aws.String(o.URL), o.SigningRegion
		})
	}
	var ec2Opts []func(*ec2.Options)
	if o, ok := cc.override("ec2", cfg.Region); ok {
		ec2Opts = append(ec2Opts, func(opts *ec2.Options) {
			opts.BaseEndpoint, opts.Region = aws.String(o.URL), o.SigningRegion
		})
	}
	return autoscaling.NewFromConfig(cfg, asgOpts...), ec2.NewFromConfig(cfg, ec2Opts...)
}

func parseSectionHeader(text string) (name, sub string, err error) {
	if !strings.HasSuffix(text, "]") {
		return "", "", fmt.Errorf("section header %q lacks its ]", text)
	}
	inner := strings.TrimSpace(text[1 : len(text)-1])
	name, rest, _ := strings.Cut(inner, " ")
	rest = strings.TrimSpace(rest)
	if rest != "" {
		if len(rest) < 2 || rest[0] != '"' || rest[len(rest)-1] != '"' {
			return "", "", fmt.Errorf("section header %q: the subsection must be double-quoted", text)
		}
		sub = rest[1 : len(rest)-1]
	}
	return name, sub, nil
}

// stripComment cuts a comment (from ; or # outside double quotes).
func stripComment(s string) string {
	quoted := false
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case !quoted && (r == ';' || r == '#'):
			return strings.TrimSpace(s[:i])
		}
	}
	return s
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
