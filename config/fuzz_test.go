package config

import (
	"math"
	"math/big"
	"strings"
	"testing"
	"time"
)

// FuzzFlagValues parses arbitrary values of --nodes, --cores-total,
// --memory-total, --gpu-total and --drain-priority-config, puts those that
// parse into the default Options and validates them. Nothing panics; a
// value that parses keeps the flag's promises (0 <= min <= max, a name, a
// sorted, unique drain list) and prints back to itself; Validate accepts
// the Options exactly when every value is usable, and what it accepts
// converts to millicores and bytes without overflow.
func FuzzFlagValues(f *testing.F) {
	for _, s := range [][5]string{
		{"1:10:pool", "0:320000", "0:6400000", "nvidia-tesla-t4:0:8", "10000:20,1000:100,0:60"},
		{"0:0:a:b:c", " 1 : 2 ", "00:01", "t:1:1", "-1:0"},
		{"3:1:pool", "2:1", "-1:5", ":1:2", "1:2,1:3"},
		{"1:2:", "1", "1:2:3", "a:b:c", "1"},
		{"0:2147483647:x", "9223372036854775:9223372036854775", "0:8589934591", "t:0:9223372036854775807", "2147483647:9223372036,-2147483648:0"},
		{"0:2147483648:x", "0:9223372036854776", "0:8589934592", "t:9223372036854775808:1", "2147483648:1"},
		{"+1:+2:x", "0x1:2", "1e3:1e4", "t:-0:0", "1:9223372037"},
		{"", "", "", "", ""},
		{"1:9223372036854775808:x", ":", "::", ":::", ","},
		{"\x00:\x00:\x00", "٣:٤", "1_000:2_000", "t:01:010", " 5:1 ,6:2"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, nodes, cores, memory, gpu, drain string) {
		o := Defaults()
		// Validate rejects exactly these values; the rest must pass.
		wantErr := false

		o.NodeGroups = []string{nodes}
		if spec, err := ParseNodeGroupSpec(nodes); err == nil {
			if spec.Min < 0 || spec.Max < spec.Min || spec.Max > math.MaxInt32 || spec.Name == "" {
				t.Fatalf("--nodes=%q parsed as %+v", nodes, spec)
			}
			if _, rest, _ := strings.Cut(nodes, ":"); !strings.HasSuffix(rest, ":"+spec.Name) {
				t.Fatalf("--nodes=%q: name %q is not what follows the second colon", nodes, spec.Name)
			}
			checkNumber(t, nodes, strings.SplitN(nodes, ":", 3)[0], int64(spec.Min))
			checkNumber(t, nodes, strings.SplitN(nodes, ":", 3)[1], int64(spec.Max))
		} else {
			wantErr = true
		}

		for _, rf := range []struct {
			value string
			dst   *Range
			limit int64
		}{{cores, &o.Cores, MaxCoresTotal}, {memory, &o.MemoryGiB, MaxMemoryTotalGiB}} {
			r, err := ParseRange(rf.value)
			if err != nil {
				continue // the flag refuses it; the default stays
			}
			if r.Min < 0 || r.Max < r.Min {
				t.Fatalf("range %q parsed as %+v", rf.value, r)
			}
			parts := strings.Split(rf.value, ":")
			checkNumber(t, rf.value, parts[0], r.Min)
			checkNumber(t, rf.value, parts[1], r.Max)
			if back, err := ParseRange(r.String()); err != nil || back != r {
				t.Fatalf("range %+v prints as %q, which parses as %+v, %v", r, r.String(), back, err)
			}
			*rf.dst = r
			if r.Max > rf.limit {
				wantErr = true
			}
		}

		if g, err := ParseGPULimit(gpu); err == nil {
			if g.Type == "" || strings.Contains(g.Type, ":") || g.Min < 0 || g.Max < g.Min {
				t.Fatalf("--gpu-total=%q parsed as %+v", gpu, g)
			}
			o.GPUTotal = []GPULimit{g}
		}

		o.DrainPriorityConfig = drain
		if list, err := ParseDrainPriorityConfig(drain); err == nil {
			seen := map[int32]bool{}
			for i, d := range list {
				if seen[d.Priority] || (i > 0 && list[i-1].Priority <= d.Priority) {
					t.Fatalf("--drain-priority-config=%q parsed as %+v: not strictly descending", drain, list)
				}
				seen[d.Priority] = true
				if d.TerminationGracePeriodSecs < 0 || d.TerminationGracePeriodSecs > math.MaxInt64/int64(time.Second) {
					t.Fatalf("--drain-priority-config=%q: grace period %d", drain, d.TerminationGracePeriodSecs)
				}
			}
			if len(list) != strings.Count(drain, ",")+1 {
				t.Fatalf("--drain-priority-config=%q parsed as %d items", drain, len(list))
			}
		} else if drain != "" {
			wantErr = true
		}

		err := o.Validate()
		if (err != nil) != wantErr {
			t.Fatalf("--nodes=%q --cores-total=%q --memory-total=%q --drain-priority-config=%q: Validate = %v, want an error: %v",
				nodes, cores, memory, drain, err, wantErr)
		}
		if err != nil {
			return
		}
		// What Validate accepts is safe to scale: millicores and bytes fit in 64 bits.
		for _, v := range []*big.Int{
			new(big.Int).Mul(big.NewInt(o.Cores.Max), big.NewInt(1000)),
			new(big.Int).Lsh(big.NewInt(o.MemoryGiB.Max), 30),
		} {
			if !v.IsInt64() {
				t.Fatalf("accepted limits overflow: cores %s, memory %s GiB", o.Cores, o.MemoryGiB)
			}
		}
	})
}

// checkNumber: the number parsed from field of value is the decimal
// integer the field spells, give or take surrounding spaces and a sign.
func checkNumber(t *testing.T, value, field string, got int64) {
	t.Helper()
	want, ok := new(big.Int).SetString(strings.TrimPrefix(strings.TrimSpace(field), "+"), 10)
	if !ok || !want.IsInt64() || want.Int64() != got {
		t.Fatalf("%q: %q read as %d", value, field, got)
	}
}
