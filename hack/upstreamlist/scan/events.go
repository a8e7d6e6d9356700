package scan

import (
	"go/ast"
	"path"
	"sort"
	"strings"
)

// EventSite is one place that records an event: its reason, or, when the
// reason is not a constant, the expression's position (Known false).
type EventSite struct {
	Reason string
	Known  bool // Reason is a constant (it may be "")
	Where  string
	Func   string // the enclosing function, "Type.method" or "func"
}

// Events finds the event reasons the files record. A reason is the argument
// after the event type: apiv1.EventTypeNormal or apiv1.EventTypeWarning in
// any call, or, in a call of Event, Eventf or AnnotatedEventf, a variable
// named for the type (eventType, kind, typ). When that argument is a
// parameter of the enclosing function, the function is a forwarder, and
// the reasons are what its callers (in the same package) pass at that
// parameter's position, followed through forwarders of forwarders. Other
// sites whose reason is not a constant are listed with Known false.
func (s *Source) Events(files []string) ([]EventSite, error) {
	type call struct {
		call *ast.CallExpr
		file *ast.File
		dir  string
		fn   *ast.FuncDecl
	}
	type site struct {
		call
		arg int
	}
	var calls []call
	for _, name := range files {
		f, err := s.File(name)
		if err != nil {
			return nil, err
		}
		dir := path.Dir(name)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok {
					calls = append(calls, call{call: c, file: f, dir: dir, fn: fd})
				}
				return true
			})
		}
	}
	forwarders := map[string]int{} // dir + " " + function name -> parameter index of the reason
	var sites []site
	seen := map[*ast.CallExpr]bool{}
	// add records that c passes its reason at argument arg: a site, or,
	// when that is a parameter of c's function, a forwarder (new: true).
	add := func(c call, arg int) bool {
		if id, ok := c.call.Args[arg].(*ast.Ident); ok {
			if at, isParam := paramIndex(c.fn)[id.Name]; isParam {
				key := c.dir + " " + c.fn.Name.Name
				if _, known := forwarders[key]; known {
					return false
				}
				forwarders[key] = at
				return true
			}
		}
		if !seen[c.call] {
			seen[c.call] = true
			sites = append(sites, site{call: c, arg: arg})
		}
		return false
	}
	for _, c := range calls {
		if at := reasonArg(c.call); at >= 0 {
			add(c, at)
		}
	}
	for changed := true; changed; {
		changed = false
		for _, c := range calls {
			at, ok := forwarders[c.dir+" "+calleeName(c.call)]
			if ok && at < len(c.call.Args) && !seen[c.call] && reasonArg(c.call) < 0 {
				changed = add(c, at) || changed
			}
		}
	}
	var out []EventSite
	for _, st := range sites {
		e := EventSite{Where: s.Position(st.call.call), Func: funcName(st.fn)}
		if v, ok := s.String(st.call.call.Args[st.arg], st.dir, st.file, nil); ok {
			e.Reason, e.Known = v, true
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Where < out[j].Where })
	return out, nil
}

// reasonArg is the index of call's reason argument, -1 when call records no
// event.
func reasonArg(call *ast.CallExpr) int {
	for i, a := range call.Args {
		if isEventType(a) && i+1 < len(call.Args) {
			return i + 1
		}
	}
	switch calleeName(call) {
	case "Event", "Eventf", "AnnotatedEventf":
	default:
		return -1
	}
	for i, a := range call.Args {
		name := ""
		switch a := a.(type) {
		case *ast.Ident:
			name = a.Name
		case *ast.SelectorExpr:
			name = a.Sel.Name
		}
		l := strings.ToLower(name)
		if (strings.Contains(l, "type") || strings.Contains(l, "kind") || l == "typ") && i+1 < len(call.Args) {
			return i + 1
		}
	}
	return -1
}

func isEventType(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && (sel.Sel.Name == "EventTypeNormal" || sel.Sel.Name == "EventTypeWarning")
}

func paramIndex(fd *ast.FuncDecl) map[string]int {
	out := map[string]int{}
	i := 0
	for _, field := range fd.Type.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, n := range field.Names {
			out[n.Name] = i
			i++
		}
	}
	return out
}

func calleeName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
