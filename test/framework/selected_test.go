package framework

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestSelectsNone(t *testing.T) {
	names := []string{"TestScaleUp", "TestScaleDownEmpty", "FuzzParse", "ExampleThing"}
	for _, tc := range []struct {
		run  string
		want bool
	}{
		{"TestScaleUp", false},
		{"^TestScaleDown", false},
		{"ScaleDown/empty", false},  // the subtest part does not decide
		{"TestOther/ScaleUp", true}, // only the top-level element selects
		{"Test[/]Nothing", true},    // a slash inside brackets is the pattern's
		{"FuzzParse", false},        // a fuzz target's seed corpus runs under -run
		{"Example", false},
		{"TestNowhere|TestAlsoNot", true},
		{"(", false}, // does not compile: the testing package says so
	} {
		if got := selectsNone(tc.run, names); got != tc.want {
			t.Errorf("selectsNone(%q) = %t, want %t", tc.run, got, tc.want)
		}
	}
	if selectsNone("TestX", nil) {
		t.Error("no test names known: the package must start as usual")
	}
}

func TestTestFunctions(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a_test.go": "package a\n\nfunc TestMain(m *testing.M) {}\n\nfunc TestOne(t *testing.T) {}\nfunc helper() {}\n",
		"b_test.go": "package a\n\nfunc FuzzTwo(f *testing.F) {}\n// func TestCommented(t *testing.T) {}\nfunc ExampleThree() {}\n",
		"c.go":      "package a\n\nfunc TestNotATestFile() {}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := testFunctions(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"ExampleThree", "FuzzTwo", "TestOne"}; !slices.Equal(got, want) {
		t.Errorf("testFunctions = %v, want %v", got, want)
	}
}
