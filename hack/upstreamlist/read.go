package main

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/autoscaler/cluster-autoscaler/hack/upstreamlist/scan"
)

// Where upstream keeps what the list reads, in kubernetes-sigs/cluster-autoscaler.
const (
	upstreamModule  = "sigs.k8s.io/cluster-autoscaler"
	upstreamFlags   = "pkg/config/flags/flags.go"
	upstreamFAQ     = "pkg/FAQ.md"
	upstreamMetrics = "pkg/metrics"
	upstreamCode    = "pkg"
	metricNamespace = "cluster_autoscaler_"
)

// Read reads upstream's lists from tree (a checkout of source at commit,
// committed on date) and returns the generated lines, and notes on what it
// could not read.
func Read(tree scan.Tree, source, commit, date string) ([]byte, []string, error) {
	src := scan.NewSource(tree, upstreamModule)
	var b bytes.Buffer
	var notes []string
	fmt.Fprintf(&b, "upstream | %s | %s | %s\n", source, commit, date)

	// Flags: the ones the flags package defines, with the default its code
	// gives; and those of the libraries the binary links, from the FAQ's
	// table (upstream generates it from the binary's help, so it also tells
	// the defaults the code does not spell as constants).
	defined, err := src.Flags(upstreamFlags)
	if err != nil {
		return nil, nil, err
	}
	faqSrc, err := tree.ReadFile(upstreamFAQ)
	if err != nil {
		return nil, nil, err
	}
	faq := scan.FAQFlags(faqSrc)
	flags := map[string]string{}
	for name, def := range faq {
		flags[name] = faqDefault(def)
	}
	for _, f := range defined {
		if f.Default == "?" {
			if _, ok := faq[f.Name]; ok {
				continue // the FAQ's
			}
			notes = append(notes, fmt.Sprintf("flag --%s (%s): default not a constant and not in the FAQ", f.Name, f.Where))
		}
		flags[f.Name] = f.Default
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		def := flags[name]
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(&b, "flag | %s | %s\n", name, def)
	}

	// Metric families, with the series InitMetrics sets at start-up.
	files, err := tree.Files(upstreamCode, true)
	if err != nil {
		return nil, nil, err
	}
	var metricFiles []string
	for _, f := range files {
		if !strings.HasPrefix(f, "pkg/cloudprovider/") || strings.HasPrefix(f, "pkg/cloudprovider/builder/") {
			metricFiles = append(metricFiles, f)
		}
	}
	var withMetrics []string
	for _, f := range metricFiles {
		text, err := tree.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		if bytes.Contains(text, []byte("Opts{")) || bytes.Contains(text, []byte("NewDesc(")) {
			withMetrics = append(withMetrics, f)
		}
	}
	fams, err := src.Families(withMetrics, "InitMetrics")
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(fams, func(a, b scan.Family) int { return strings.Compare(a.Name, b.Name) })
	for _, f := range fams {
		name, ok := strings.CutPrefix(f.Name, metricNamespace)
		if !ok {
			notes = append(notes, fmt.Sprintf("metric %s (%s) is outside the cluster_autoscaler namespace; not listed", f.Name, f.Where))
			continue
		}
		fmt.Fprintf(&b, "metric | %s | %s | %s | %s | %s\n", name, f.Type, dash(strings.Join(f.Labels, ",")), f.Buckets,
			dash(strings.Join(f.Preset, ";")))
	}

	// Labels of function_duration_seconds.
	for _, v := range slices.Sorted(maps.Values(src.ConstsOfType(upstreamMetrics, "FunctionLabel", ""))) {
		fmt.Fprintf(&b, "function | %s\n", v)
	}

	// Event reasons, from the whole of the core (cloud providers aside:
	// each is a provider of its own).
	sites, err := src.Events(metricFiles)
	if err != nil {
		return nil, nil, err
	}
	reasons := map[string]bool{}
	for _, s := range sites {
		if !s.Known {
			notes = append(notes, fmt.Sprintf("event at %s (%s): reason not a constant", s.Where, s.Func))
			fmt.Fprintf(&b, "# event reason not read: %s (%s)\n", s.Where, s.Func)
			continue
		}
		reasons[dash(s.Reason)] = true
	}
	for _, r := range slices.Sorted(maps.Keys(reasons)) {
		fmt.Fprintf(&b, "event | %s\n", r)
	}
	return b.Bytes(), notes, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// faqDefault turns the FAQ's default into pflag's spelling: the table
// quotes strings and leaves zero values empty ("—": not told).
func faqDefault(s string) string {
	s = strings.Trim(s, `"`)
	if s == "" {
		return "—"
	}
	return s
}
