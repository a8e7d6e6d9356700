package expander

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"
)

// FuzzPriorityConfigMap feeds arbitrary text to the priority expander as
// the priorities key of its ConfigMap. It never panics; text that is not a
// non-empty map of integer priorities to lists of valid expressions is
// refused with a Warning event and every option is kept; otherwise the
// options kept are those a plain reading of the map prefers: the ones whose
// node group matches an expression of the highest priority any of them
// matches (all of them when none matches).
func FuzzPriorityConfigMap(f *testing.F) {
	for _, s := range []string{
		"10:\n  - std-a\n50:\n  - gpu-a\n20:\n  - .*\n",
		"50: [^std-]\n1: [.*]\n",
		"-5: [std-a]\n-10: ['.*']\n",
		"50:\n  - std-a\n50:\n  - std-b\n",
		"5: [nothing]\n",
		"10: []\n20: [large]\n",
		"10: std-a\n",
		"high: [std-a]\n",
		"10: [std-(a]\n",
		"10: ['(?i)STD']\n",
		"9223372036854775807: [a]\n-9223372036854775808: [b]\n",
		"99999999999999999999: [a]\n",
		"1.5: [a]\n",
		"0x10: [a]\n",
		"10: [null]\n",
		"? [a, b]\n: [c]\n",
		"a: &x [b]\nc: *x\n",
		"10: [a{1000}{1000}]\n",
		"",
		"{}",
		"[]",
		"---\n10: [a]\n---\n20: [b]\n",
		"\t10: [a]",
	} {
		f.Add(s)
	}
	groups := []string{"std-a", "std-b", "gpu-a", "m5-large-pool", "STD-C"}
	f.Fuzz(func(t *testing.T, source string) {
		w := newWorld()
		var specs []optionSpec
		for i, g := range groups {
			w.group(g, nil)
			specs = append(specs, optionSpec{group: g, nodes: i + 1})
		}
		options := w.options(t, specs)
		_, lister := configMaps(t, withPriorities(source))
		recorder := record.NewFakeRecorder(100)
		p, err := newPriority(lister, recorder, testNamespace)
		if err != nil {
			t.Fatal(err)
		}
		got := ids(p.BestOptions(t.Context(), options, nil))
		all := ids(options)

		want, valid := preferredByPriorities(source, groups, all)
		_, parseErr := parsePriorities(source)
		if valid != (parseErr == nil) {
			t.Fatalf("priorities %q: parse error %v, but a plain reading says valid=%v", source, parseErr, valid)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("priorities %q: kept %v, want %v", source, got, want)
		}
		events := reasons(recorder)
		if !valid && !slices.Equal(events, []string{"Warning " + ReasonPriorityConfigMapInvalid}) {
			t.Fatalf("priorities %q refused with events %v", source, events)
		}
		// A second call reads the same, parsed or cached.
		if again := ids(p.BestOptions(t.Context(), options, nil)); !slices.Equal(again, got) {
			t.Fatalf("priorities %q: kept %v, then %v", source, got, again)
		}
	})
}

// preferredByPriorities is the model: it reads the map its own way (every
// expression of every priority tried) and returns the options to keep and
// whether the text is a usable configuration.
func preferredByPriorities(source string, groups, all []string) ([]string, bool) {
	var raw map[int][]string
	if yaml.Unmarshal([]byte(source), &raw) != nil || len(raw) == 0 {
		return all, false
	}
	best := map[string]int{}
	for prio, exprs := range raw {
		for _, e := range exprs {
			re, err := regexp.Compile(e)
			if err != nil {
				return all, false
			}
			for _, g := range groups {
				if cur, seen := best[g]; re.MatchString(g) && (!seen || prio > cur) {
					best[g] = prio
				}
			}
		}
	}
	top, found := 0, false
	for _, p := range best {
		if !found || p > top {
			top, found = p, true
		}
	}
	if !found {
		return all, true
	}
	var keep []string
	for _, id := range all {
		if p, ok := best[strings.Split(id, "/")[0]]; ok && p == top {
			keep = append(keep, id)
		}
	}
	return keep, true
}
