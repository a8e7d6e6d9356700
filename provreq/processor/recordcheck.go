package processor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxAsked bounds an instance count read from a record.
const maxAsked = 1_000_000

// decodeRecord parses and checks one record. An instance claimed by an
// earlier record (claimedBy) makes it inconsistent; its claims are added
// to claimedBy when it is accepted.
func decodeRecord(data string, now time.Time, claimedBy map[string]string, key string) (*requestRecord, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(data)))
	var rec requestRecord
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("not a record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a record: text after the JSON document")
	}
	if rec.Version != recordVersion {
		return nil, fmt.Errorf("version %d, want %d", rec.Version, recordVersion)
	}
	var problems []string
	claims := map[string]string{}
	ns, name, ok := strings.Cut(rec.Request, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		problems = append(problems, fmt.Sprintf("request %q is not a namespace/name", rec.Request))
	}
	if a := rec.Attempt; a != nil {
		if a.Started.IsZero() || a.Started.After(now.Add(time.Minute)) {
			problems = append(problems, fmt.Sprintf("attempt: start time %v is not a past time", a.Started))
		}
		problems = append(problems, checkShares("attempt", a.Groups, claims, claimedBy)...)
	}
	for i, u := range rec.Rollbacks {
		if u.Since.IsZero() || u.Since.After(now.Add(time.Minute)) {
			problems = append(problems, fmt.Sprintf("rollback %d: start time %v is not a past time", i, u.Since))
		}
		if !u.Failed.IsZero() && (u.Failed.Before(u.Since) || u.Failed.After(now.Add(time.Minute))) {
			problems = append(problems, fmt.Sprintf("rollback %d: failure time %v is not a past time after its start", i, u.Failed))
		}
		problems = append(problems, checkShares(fmt.Sprintf("rollback %d", i), u.Groups, claims, claimedBy)...)
	}
	for _, n := range rec.Nodes {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("node name %q: %s", n, strings.Join(msgs, "; ")))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, errors.New(strings.Join(problems, "; "))
	}
	for id := range claims {
		claimedBy[id] = key
	}
	return &rec, nil
}

// checkShares checks the shares of an attempt or rollback on record (what)
// and returns the problems found. claims are the instances the record
// claimed so far, claimedBy those of the records accepted before it.
func checkShares(what string, groups map[string]shareRecord, claims, claimedBy map[string]string) []string {
	var problems []string
	if len(groups) == 0 {
		problems = append(problems, what+" has no node group")
	}
	for g, sh := range groups {
		where := fmt.Sprintf("%s, node group %q", what, g)
		if g == "" {
			problems = append(problems, what+": a node group without a name")
		}
		if sh.Asked < 0 || sh.Asked > maxAsked {
			problems = append(problems, fmt.Sprintf("%s: asked %d is out of range", where, sh.Asked))
		}
		if n := len(sh.Claimed) + len(sh.Adopted); n > sh.Asked {
			problems = append(problems, fmt.Sprintf("%s: %d instances claimed or adopted, more than the %d asked", where, n, sh.Asked))
		}
		before := map[string]bool{}
		for _, id := range sh.Before {
			before[id] = true
		}
		for _, id := range append(append([]string(nil), sh.Claimed...), sh.Adopted...) {
			switch {
			case id == "":
				problems = append(problems, where+": an empty instance id")
			case before[id]:
				problems = append(problems, fmt.Sprintf("%s: instance %s is claimed but was there before the increase", where, id))
			case claims[id] != "" || claimedBy[id] != "":
				problems = append(problems, fmt.Sprintf("%s: instance %s is claimed twice", where, id))
			default:
				claims[id] = g
			}
		}
		for id := range sh.Kept {
			if !slices.Contains(sh.Claimed, id) {
				problems = append(problems, fmt.Sprintf("%s: instance %s is kept but not claimed", where, id))
			}
		}
	}
	return problems
}
