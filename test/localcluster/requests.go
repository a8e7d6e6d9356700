package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RequestsEnv, set to a number N, makes Stop print the N request kinds
// (verb, resource, subresource, client) that cost kube-apiserver the most
// time, from its own metrics (docs/test-times.md: which requests of a test
// package the control plane spends its CPU on).
const RequestsEnv = "LOCALCLUSTER_REQUESTS"

// requestKind is one row of the report.
type requestKind struct {
	key     string
	count   float64
	seconds float64
}

// reportRequests prints the top request kinds when RequestsEnv asks for them.
func (c *Cluster) reportRequests() {
	n, err := strconv.Atoi(os.Getenv(RequestsEnv))
	if err != nil || n <= 0 || c.Server == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := c.requestKinds(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: reading kube-apiserver's request metrics: %v\n", err)
		return
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].seconds > rows[j].seconds })
	total := 0.0
	for _, r := range rows {
		total += r.count
	}
	fmt.Fprintf(os.Stderr, "localcluster: %.0f requests to kube-apiserver; the costliest (count, seconds of handling):\n", total)
	for i, r := range rows {
		if i == n {
			break
		}
		fmt.Fprintf(os.Stderr, "  %-70s %7.0f %8.1f\n", r.key, r.count, r.seconds)
	}
}

// requestKinds reads apiserver_request_duration_seconds' count and sum per
// verb, resource and subresource (watches excluded: their duration is how
// long they stayed open).
func (c *Cluster) requestKinds(ctx context.Context) ([]requestKind, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := probeClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %d", resp.StatusCode)
	}
	byKey := map[string]*requestKind{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var sum bool
		switch {
		case strings.HasPrefix(line, "apiserver_request_duration_seconds_sum{"):
			sum = true
		case strings.HasPrefix(line, "apiserver_request_duration_seconds_count{"):
		default:
			continue
		}
		labels, value, ok := splitSample(line)
		if !ok || labels["verb"] == "WATCH" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if s := labels["subresource"]; s != "" {
			key += "/" + s
		}
		if s := labels["scope"]; s != "" {
			key += " (" + s + ")"
		}
		r := byKey[key]
		if r == nil {
			r = &requestKind{key: key}
			byKey[key] = r
		}
		if sum {
			r.seconds += value
		} else {
			r.count += value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	rows := make([]requestKind, 0, len(byKey))
	for _, r := range byKey {
		rows = append(rows, *r)
	}
	return rows, nil
}

// splitSample parses `name{a="x",b="y"} value` (label values here hold no
// commas or quotes).
func splitSample(line string) (map[string]string, float64, bool) {
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return nil, 0, false
	}
	labels := map[string]string{}
	for _, kv := range strings.Split(line[open+1:end], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			labels[k] = strings.Trim(v, `"`)
		}
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
	if err != nil {
		return nil, 0, false
	}
	return labels, value, true
}
