package scan

import (
	"fmt"
	"go/ast"
	"go/constant"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Family is one metric family as the source defines it.
type Family struct {
	Name    string   // full name, namespace included
	Type    string   // counter, gauge, histogram, summary; custom for a collector's own Desc
	Labels  []string // in declaration order; nil for none
	Buckets string   // "-", exp(start,factor,count), exprange(min,max,count), default, or "?"
	Preset  []string // series set at start-up, each "v1,v2" in label order; sorted
	Where   string
	field   string // the struct field the constructor's result is assigned to
}

var constructor = regexp.MustCompile(`^New(Counter|Gauge|Histogram|Summary)(Vec)?$`)

// Families lists the metric families the files define with client_golang's
// or component-base's constructors (NewCounterVec(&CounterOpts{...},
// labels)) and with NewDesc, and the series the function named preset
// (InitMetrics) sets at start-up.
func (s *Source) Families(files []string, preset string) ([]Family, error) {
	var out []Family
	for _, name := range files {
		f, err := s.File(name)
		if err != nil {
			return nil, err
		}
		dir := path.Dir(name)
		var fams []Family
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				key, ok1 := n.Key.(*ast.Ident)
				call, ok2 := n.Value.(*ast.CallExpr)
				if ok1 && ok2 {
					if fam, ok := s.family(call, dir, f); ok {
						fam.field = key.Name
						fams = append(fams, fam)
						return false
					}
				}
			case *ast.CallExpr:
				if fam, ok := s.family(n, dir, f); ok {
					fams = append(fams, fam)
					return false
				}
			}
			return true
		})
		if preset != "" {
			s.presets(f, dir, preset, fams)
		}
		out = append(out, fams...)
	}
	return out, nil
}

// family reads one constructor call.
func (s *Source) family(call *ast.CallExpr, dir string, f *ast.File) (Family, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return Family{}, false
	}
	if sel.Sel.Name == "NewDesc" && len(call.Args) >= 3 {
		name, ok := s.fqName(call.Args[0], dir, f)
		if !ok {
			return Family{}, false
		}
		labels, _ := s.Strings(call.Args[2], dir, f)
		return Family{Name: name, Type: "custom", Labels: nilIfEmpty(labels), Buckets: "-", Where: s.Position(call)}, true
	}
	m := constructor.FindStringSubmatch(sel.Sel.Name)
	if m == nil || len(call.Args) == 0 {
		return Family{}, false
	}
	u, ok := call.Args[0].(*ast.UnaryExpr)
	if !ok {
		return Family{}, false
	}
	lit, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return Family{}, false
	}
	fam := Family{Type: strings.ToLower(m[1]), Buckets: "-", Where: s.Position(call)}
	parts := map[string]string{}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key := kv.Key.(*ast.Ident).Name
		switch key {
		case "Namespace", "Subsystem", "Name":
			v, _ := s.String(kv.Value, dir, f, nil)
			parts[key] = v
		case "Buckets":
			fam.Buckets = s.buckets(kv.Value, dir, f)
		}
	}
	if fam.Type == "histogram" && fam.Buckets == "-" {
		fam.Buckets = "default"
	}
	fam.Name = joinName(parts["Namespace"], parts["Subsystem"], parts["Name"])
	if m[2] != "" {
		if len(call.Args) < 2 {
			return Family{}, false
		}
		labels, ok := s.Strings(call.Args[1], dir, f)
		if !ok {
			labels = []string{"?"}
		}
		fam.Labels = nilIfEmpty(labels)
	}
	return fam, fam.Name != ""
}

func nilIfEmpty(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	return l
}

func joinName(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "_")
}

// fqName evaluates a Desc's name: a constant or BuildFQName(ns, sub, name).
func (s *Source) fqName(e ast.Expr, dir string, f *ast.File) (string, bool) {
	if call, ok := e.(*ast.CallExpr); ok {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "BuildFQName" && len(call.Args) == 3 {
			var parts []string
			for _, a := range call.Args {
				v, ok := s.String(a, dir, f, nil)
				if !ok {
					return "", false
				}
				parts = append(parts, v)
			}
			return joinName(parts...), true
		}
	}
	return s.String(e, dir, f, nil)
}

// buckets spells a Buckets expression.
func (s *Source) buckets(e ast.Expr, dir string, f *ast.File) string {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 3 {
		return "?"
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "?"
	}
	fn := map[string]string{"ExponentialBuckets": "exp", "ExponentialBucketsRange": "exprange",
		"LinearBuckets": "linear"}[sel.Sel.Name]
	if fn == "" {
		return "?"
	}
	var args []string
	for _, a := range call.Args {
		v := s.Eval(a, dir, f, nil)
		if v == nil {
			return "?"
		}
		x, _ := constant.Float64Val(constant.ToFloat(v))
		args = append(args, strconv.FormatFloat(x, 'g', -1, 64))
	}
	return fmt.Sprintf("%s(%s)", fn, strings.Join(args, ","))
}

// presets reads function name of f: each m.<field>.WithLabelValues(...).Add(0),
// also inside a range over a literal list, is a series set at start-up.
func (s *Source) presets(f *ast.File, dir, name string, fams []Family) {
	byField := map[string]*Family{}
	for i := range fams {
		if fams[i].field != "" {
			byField[fams[i].field] = &fams[i]
		}
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if ok && fd.Name.Name == name && fd.Body != nil {
			s.presetStmts(fd.Body.List, dir, f, map[string]constant.Value{}, byField)
		}
	}
	for _, fam := range byField {
		sort.Strings(fam.Preset)
	}
}

func (s *Source) presetStmts(stmts []ast.Stmt, dir string, f *ast.File, env map[string]constant.Value,
	byField map[string]*Family) {
	for _, st := range stmts {
		switch st := st.(type) {
		case *ast.RangeStmt:
			lit, ok := st.X.(*ast.CompositeLit)
			v, ok2 := st.Value.(*ast.Ident)
			if !ok || !ok2 {
				continue
			}
			for _, el := range lit.Elts {
				val := s.Eval(el, dir, f, env)
				if val == nil {
					continue
				}
				inner := map[string]constant.Value{}
				for k, x := range env {
					inner[k] = x
				}
				inner[v.Name] = val
				s.presetStmts(st.Body.List, dir, f, inner, byField)
			}
		case *ast.ExprStmt:
			s.presetCall(st.X, dir, f, env, byField)
		}
	}
}

// presetCall reads m.field.WithLabelValues(v...).Add(0).
func (s *Source) presetCall(e ast.Expr, dir string, f *ast.File, env map[string]constant.Value, byField map[string]*Family) {
	add, ok := e.(*ast.CallExpr)
	if !ok {
		return
	}
	addSel, ok := add.Fun.(*ast.SelectorExpr)
	if !ok || addSel.Sel.Name != "Add" {
		return
	}
	wlv, ok := addSel.X.(*ast.CallExpr)
	if !ok {
		return
	}
	wlvSel, ok := wlv.Fun.(*ast.SelectorExpr)
	if !ok || wlvSel.Sel.Name != "WithLabelValues" {
		return
	}
	field, ok := wlvSel.X.(*ast.SelectorExpr)
	if !ok {
		return
	}
	fam := byField[field.Sel.Name]
	if fam == nil {
		return
	}
	var values []string
	for _, a := range wlv.Args {
		v, ok := s.String(a, dir, f, env)
		if !ok {
			v = "?"
		}
		values = append(values, v)
	}
	fam.Preset = append(fam.Preset, strings.Join(values, ","))
}
