// Package testbuild builds the API objects unit tests start from, fluently:
// testbuild.Pod("p").Req("1", "2Gi").On("n1").Obj() and
// testbuild.Node("n1").Resources("4", "16Gi", "110").Obj(). It is the one set
// of pod and node builders the unit tests of simulator/framework,
// simulator/drain, expander and estimator share; a package keeps at most a
// one-line default of its own on top (the drain tests' pods run on n1).
//
// It imports the API types and apimachinery only, so any package's tests can
// use it without pulling in more than they already build.
package testbuild
