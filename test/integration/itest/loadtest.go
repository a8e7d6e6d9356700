package itest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// seriesValues parses a /metrics body into the value of every sample, keyed
// by the series as written: `name{label="v",...}` or `name`.
func seriesValues(body string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}

// SumOf adds the samples of the named series whose labels hold every one of
// the given `key="value"` pairs.
func SumOf(values map[string]float64, name string, labels ...string) float64 {
	var sum float64
	for series, v := range values {
		rest, ok := strings.CutPrefix(series, name)
		if !ok || (rest != "" && rest[0] != '{') {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				match = false
				break
			}
		}
		if match {
			sum += v
		}
	}
	return sum
}

// ScrapeValues fetches and parses the autoscaler's /metrics, uncompressed
// (gzip would make the frequent scrapes of the long benchmarks cost the
// process more CPU than some of its loops).
func ScrapeValues(ctx context.Context, p *AutoscalerProcess) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Address+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %d", resp.StatusCode)
	}
	return seriesValues(string(body)), nil
}
