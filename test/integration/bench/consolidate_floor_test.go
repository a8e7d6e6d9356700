package bench

import "testing"

// TestConsolidateFewestMoves checks the benchmark's eviction floor on a
// case worked by hand: 32 kept pods, two large nodes holding 10 and 6,
// three small ones holding 4, 4 and 1.
func TestConsolidateFewestMoves(t *testing.T) {
	byGroup := map[string][]int{"large": {6, 10}, "small": {4, 1, 4}}
	for _, c := range []struct {
		limit float64
		want  int
	}{
		{1.28, 16},     // two large nodes only (the bound): 16 stay
		{1.44, 13},     // one large (10) and four small (4+4+1+new): 19 stay
		{1.27, -1},     // nothing holds 32 CPUs for less than the bound
		{100, 32 - 25}, // everything kept, plus new room
	} {
		if got := consolidateFewestMoves(byGroup, 32, c.limit+1e-9); got != c.want {
			t.Errorf("limit %.2f: %d pods must move, want %d", c.limit, got, c.want)
		}
	}
}
