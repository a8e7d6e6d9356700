package awsfake

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// listParam returns the values of a query-protocol list: prefix.1,
// prefix.2, ... (prefix is e.g. "AutoScalingGroupNames.member" or
// "InstanceType"), in index order.
func listParam(form url.Values, prefix string) []string {
	type kv struct {
		i int
		v string
	}
	var items []kv
	for k, vs := range form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(vs) == 0 {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil {
			continue
		}
		items = append(items, kv{i, vs[0]})
	}
	sort.Slice(items, func(a, b int) bool { return items[a].i < items[b].i })
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.v
	}
	return out
}

// filter is one entry of Filters.member.N (Auto Scaling) or Filter.N (EC2).
type filter struct {
	name   string
	values []string
}

// filtersParam parses Filters.member.N.Name / .Values.member.M.
func filtersParam(form url.Values) []filter {
	var out []filter
	for i := 1; ; i++ {
		p := fmt.Sprintf("Filters.member.%d", i)
		name := form.Get(p + ".Name")
		if name == "" {
			return out
		}
		out = append(out, filter{name: name, values: listParam(form, p+".Values.member")})
	}
}

// intParam parses an optional integer parameter within [lo, hi]; def when
// absent.
func intParam(form url.Values, name string, def, lo, hi int, mkErr func(string, ...any) *apiError) (int, *apiError) {
	raw := form.Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		return 0, mkErr("Value '%s' at '%s' failed to satisfy constraint: Member must be a number", raw, name)
	}
	if n < lo || n > hi {
		return 0, mkErr("1 validation error detected: Value '%d' at '%s' failed to satisfy constraint: Member must have value between %d and %d", n, name, lo, hi)
	}
	return n, nil
}

// paginate returns the page of sorted keys after the token's key, at most
// max long, and the token of the next page ("" on the last page). A token
// is the base64 of the last key of the previous page.
func paginate(keys []string, token string, limit int, invalidCode string) ([]string, string, *apiError) {
	start := 0
	if token != "" {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || !strings.HasPrefix(string(raw), "awsfake:") {
			return nil, "", &apiError{status: http.StatusBadRequest, code: invalidCode, message: "The token '" + token + "' is invalid."}
		}
		last := strings.TrimPrefix(string(raw), "awsfake:")
		start = sort.SearchStrings(keys, last)
		if start < len(keys) && keys[start] == last {
			start++
		}
	}
	end := min(len(keys), start+limit)
	page := keys[start:end]
	if end == len(keys) {
		return page, "", nil
	}
	return page, base64.RawURLEncoding.EncodeToString([]byte("awsfake:" + keys[end-1])), nil
}
