package scan

import (
	"go/ast"
	"go/constant"
	"path"
	"strconv"
	"strings"
	"time"
)

// Flag is one command-line flag and its default, spelled as pflag's
// DefValue spells it ("10m0s", "[]", "0.5"); Default is "?" when the
// default is not a constant this reader can evaluate.
type Flag struct {
	Name    string
	Default string
	Where   string // file:line of the definition
}

// flagMethods are pflag's FlagSet methods that define a flag, by the index
// of the name argument (the default follows it).
var flagMethods = map[string]int{
	"BoolVar": 1, "DurationVar": 1, "Float64Var": 1, "IntVar": 1, "Int64Var": 1, "StringVar": 1,
	"StringArrayVar": 1, "StringSliceVar": 1, "UintVar": 1,
	"Bool": 0, "Duration": 0, "Float64": 0, "Int": 0, "Int64": 0, "String": 0, "StringArray": 0, "StringSlice": 0,
}

// Flags lists the flags that the .go files of file's package define through
// a FlagSet (fs.BoolVar(&x, "name", default, usage) and its kin) in file.
func (s *Source) Flags(file string) ([]Flag, error) {
	f, err := s.File(file)
	if err != nil {
		return nil, err
	}
	dir := path.Dir(file)
	var out []Flag
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		at, ok := flagMethods[sel.Sel.Name]
		if !ok || len(call.Args) < at+3 {
			return true
		}
		name, ok := s.String(call.Args[at], dir, f, nil)
		if !ok {
			return true
		}
		out = append(out, Flag{Name: name, Default: s.flagDefault(strings.TrimSuffix(sel.Sel.Name, "Var"),
			call.Args[at+1], dir, f), Where: s.Position(call)})
		return true
	})
	return out, nil
}

// flagDefault spells a default the way pflag's DefValue does for kind
// (Bool, Duration, ...).
func (s *Source) flagDefault(kind string, e ast.Expr, dir string, f *ast.File) string {
	if kind == "StringArray" || kind == "StringSlice" {
		list, ok := s.Strings(e, dir, f)
		if !ok {
			return "?"
		}
		return "[" + strings.Join(list, ",") + "]"
	}
	v := s.Eval(e, dir, f, nil)
	if v == nil {
		return "?"
	}
	switch kind {
	case "Bool":
		if v.Kind() == constant.Bool {
			return strconv.FormatBool(constant.BoolVal(v))
		}
	case "Duration":
		if n, ok := constant.Int64Val(constant.ToInt(v)); ok {
			return time.Duration(n).String()
		}
	case "Int", "Int64", "Uint":
		if n, ok := constant.Int64Val(constant.ToInt(v)); ok {
			return strconv.FormatInt(n, 10)
		}
	case "Float64":
		if f := constant.ToFloat(v); f.Kind() == constant.Float {
			x, _ := constant.Float64Val(f) // inexact for most decimals, as the compiler's
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
	case "String":
		if v.Kind() == constant.String {
			return constant.StringVal(v)
		}
	}
	return "?"
}

// FAQFlags reads the flag table of upstream's FAQ ("| `name` | usage |
// default |"), which upstream generates from its binary's help and which so
// also holds the flags of the libraries it links (klog, leader election,
// logging): name -> default as the table shows it ("" for a zero default).
func FAQFlags(faq []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(faq), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 4 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cols[1]), "`")
		if name == "" || strings.ContainsAny(name, " ") {
			continue
		}
		out[name] = strings.TrimSpace(cols[len(cols)-2])
	}
	return out
}
