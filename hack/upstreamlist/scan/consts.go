package scan

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"path"
	"strconv"
	"strings"
	"time"
)

// Tree is a source tree: a module's files by slash-separated path relative
// to the module root.
type Tree interface {
	// ReadFile returns a file's contents.
	ReadFile(name string) ([]byte, error)
	// Files lists the .go files (not _test.go) directly in dir, or, when
	// recursive, in dir and below it.
	Files(dir string, recursive bool) ([]string, error)
}

// Source is a parsed tree: files are parsed once, and package constants
// are evaluated on demand.
type Source struct {
	tree       Tree
	modulePath string // import path of the tree's root, e.g. sigs.k8s.io/cluster-autoscaler
	fset       *token.FileSet
	files      map[string]*ast.File
	pkgs       map[string]*pkgConsts
}

// NewSource reads tree, whose root has import path modulePath.
func NewSource(tree Tree, modulePath string) *Source {
	return &Source{tree: tree, modulePath: modulePath, fset: token.NewFileSet(), files: map[string]*ast.File{},
		pkgs: map[string]*pkgConsts{}}
}

// File parses name.
func (s *Source) File(name string) (*ast.File, error) {
	if f, ok := s.files[name]; ok {
		return f, nil
	}
	src, err := s.tree.ReadFile(name)
	if err != nil {
		return nil, err
	}
	f, err := parser.ParseFile(s.fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	s.files[name] = f
	return f, nil
}

// Position names a node's file and line.
func (s *Source) Position(n ast.Node) string {
	p := s.fset.Position(n.Pos())
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

// pkgConsts are one package's constants, evaluated when first asked.
type pkgConsts struct {
	specs  map[string]constSpec
	values map[string]constant.Value
	busy   map[string]bool
	types  map[string]string // constant name -> declared type name ("" when untyped)
	named  map[string]bool   // the package's type names, for conversions
}

type constSpec struct {
	expr ast.Expr
	file *ast.File
}

func (s *Source) pkg(dir string) *pkgConsts {
	if p, ok := s.pkgs[dir]; ok {
		return p
	}
	p := &pkgConsts{specs: map[string]constSpec{}, values: map[string]constant.Value{}, busy: map[string]bool{},
		types: map[string]string{}, named: map[string]bool{}}
	s.pkgs[dir] = p
	names, err := s.tree.Files(dir, false)
	if err != nil {
		return p
	}
	for _, name := range names {
		f, err := s.File(name)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if ok && g.Tok == token.TYPE {
				for _, spec := range g.Specs {
					p.named[spec.(*ast.TypeSpec).Name.Name] = true
				}
			}
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						p.specs[n.Name] = constSpec{expr: vs.Values[i], file: f}
						p.types[n.Name] = typ
					}
				}
			}
		}
	}
	return p
}

// Const is the value of constant name of the package in dir (nil: unknown).
func (s *Source) Const(dir, name string) constant.Value {
	p := s.pkg(dir)
	if v, ok := p.values[name]; ok {
		return v
	}
	spec, ok := p.specs[name]
	if !ok || p.busy[name] {
		return nil
	}
	p.busy[name] = true
	v := s.Eval(spec.expr, dir, spec.file, nil)
	p.busy[name] = false
	p.values[name] = v
	return v
}

// ConstsOfType lists the constants of the package in dir declared with type
// typ (by name: "FunctionLabel"), or, with typ "", whose names start with
// prefix; the values are strings.
func (s *Source) ConstsOfType(dir, typ, prefix string) map[string]string {
	p := s.pkg(dir)
	out := map[string]string{}
	for name := range p.specs {
		if (typ != "" && p.types[name] != typ) || !strings.HasPrefix(name, prefix) {
			continue
		}
		if v := s.Const(dir, name); v != nil && v.Kind() == constant.String {
			out[name] = constant.StringVal(v)
		}
	}
	return out
}

// importDir is the directory, in the tree, of the package file imports as
// alias ("" when it is outside the tree).
func (s *Source) importDir(file *ast.File, alias string) (string, bool) {
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := path.Base(p)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name != alias {
			continue
		}
		if p == s.modulePath {
			return ".", true
		}
		if rest, ok := strings.CutPrefix(p, s.modulePath+"/"); ok {
			return rest, true
		}
		return p, false
	}
	return "", false
}

var timeUnits = map[string]time.Duration{"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond,
	"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}

// Eval evaluates a constant expression of file, a file of the package in
// dir; env binds local names (a range variable). nil: not a constant this
// reader can evaluate.
func (s *Source) Eval(e ast.Expr, dir string, file *ast.File, env map[string]constant.Value) constant.Value {
	switch e := e.(type) {
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(e.Value, e.Kind, 0)
		if v.Kind() == constant.Unknown {
			return nil
		}
		return v
	case *ast.ParenExpr:
		return s.Eval(e.X, dir, file, env)
	case *ast.Ident:
		if v, ok := env[e.Name]; ok {
			return v
		}
		switch e.Name {
		case "true":
			return constant.MakeBool(true)
		case "false":
			return constant.MakeBool(false)
		}
		return s.Const(dir, e.Name)
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil
		}
		d, inTree := s.importDir(file, x.Name)
		if d == "time" {
			if u, ok := timeUnits[e.Sel.Name]; ok {
				return constant.MakeInt64(int64(u))
			}
		}
		if !inTree {
			return nil
		}
		return s.Const(d, e.Sel.Name)
	case *ast.UnaryExpr:
		x := s.Eval(e.X, dir, file, env)
		if x == nil || (e.Op != token.SUB && e.Op != token.ADD) {
			return nil
		}
		return constant.UnaryOp(e.Op, x, 0)
	case *ast.BinaryExpr:
		x, y := s.Eval(e.X, dir, file, env), s.Eval(e.Y, dir, file, env)
		if x == nil || y == nil {
			return nil
		}
		switch e.Op {
		case token.ADD, token.SUB, token.MUL:
			return constant.BinaryOp(x, e.Op, y)
		case token.QUO:
			if x.Kind() == constant.Int && y.Kind() == constant.Int {
				return constant.BinaryOp(x, token.QUO_ASSIGN, y)
			}
			return constant.BinaryOp(x, e.Op, y)
		}
		return nil
	case *ast.CallExpr:
		// Conversions: string(x), float64(x), time.Duration(x).
		if len(e.Args) != 1 {
			return nil
		}
		switch f := e.Fun.(type) {
		case *ast.Ident:
			switch f.Name {
			case "string", "float64", "float32", "int", "int64", "int32":
				return s.Eval(e.Args[0], dir, file, env)
			}
			if s.pkg(dir).named[f.Name] {
				return s.Eval(e.Args[0], dir, file, env)
			}
		case *ast.SelectorExpr:
			if x, ok := f.X.(*ast.Ident); ok && x.Name == "time" && f.Sel.Name == "Duration" {
				return s.Eval(e.Args[0], dir, file, env)
			}
		}
	}
	return nil
}

// String evaluates e as a string (ok false: not a string constant).
func (s *Source) String(e ast.Expr, dir string, file *ast.File, env map[string]constant.Value) (string, bool) {
	v := s.Eval(e, dir, file, env)
	if v == nil || v.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(v), true
}

// Strings evaluates a []string{...} literal (ok false: anything else).
func (s *Source) Strings(e ast.Expr, dir string, file *ast.File) ([]string, bool) {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	out := []string{}
	for _, el := range lit.Elts {
		v, ok := s.String(el, dir, file, nil)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}
