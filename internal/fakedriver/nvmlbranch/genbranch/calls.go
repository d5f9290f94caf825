//go:build cgo

package genbranch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// handleInterfaces are go-nvml's interfaces whose methods gpuwatch may call,
// with the prefix of their keys in the generated method table ("" for the
// library: "DeviceGetCount"; "Device." for a device: "Device.GetName").
var handleInterfaces = []struct {
	prefix string
	iface  reflect.Type
}{
	{"", reflect.TypeFor[nvml.Interface]()},
	{"Device.", reflect.TypeFor[nvml.Device]()},
	{"GpuInstance.", reflect.TypeFor[nvml.GpuInstance]()},
	{"ComputeInstance.", reflect.TypeFor[nvml.ComputeInstance]()},
	{"EventSet.", reflect.TypeFor[nvml.EventSet]()},
	{"GpmSample.", reflect.TypeFor[nvml.GpmSample]()},
	{"Unit.", reflect.TypeFor[nvml.Unit]()},
	{"VgpuInstance.", reflect.TypeFor[nvml.VgpuInstance]()},
	{"VgpuTypeId.", reflect.TypeFor[nvml.VgpuTypeId]()},
}

// funcKey names a function ("nvmlInit_v2") or a method ("nvmlDevice.GetName")
// of go-nvml's package nvml.
type funcKey string

// callGraph is what methodSymbols needs from go-nvml's source: per function,
// what it calls, and the C symbol a low-level binding calls.
type callGraph struct {
	calls   map[funcKey][]funcKey
	cSymbol map[funcKey]string
	// versioned are the package variables go-nvml points at the newest
	// version of a function the loaded library has (lib.go,
	// updateVersionedSymbols): each maps to every function assigned to it.
	versioned map[funcKey][]funcKey
	methods   map[string][]funcKey // method name -> every receiver's method
	defined   map[funcKey]bool
}

// readCallGraph parses the non-test Go files of go-nvml's package nvml in dir.
func readCallGraph(dir string) (*callGraph, error) {
	g := &callGraph{
		calls: map[funcKey][]funcKey{}, cSymbol: map[funcKey]string{},
		versioned: map[funcKey][]funcKey{}, methods: map[string][]funcKey{},
		defined: map[funcKey]bool{},
	}
	decls, receivers, err := g.readDeclarations(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range decls {
		g.addFunction(d, receivers)
	}
	g.resolveUntypedCalls()
	// Only variables that hold functions are versioned symbols.
	for v, alts := range g.versioned {
		if !g.defined[alts[0]] {
			delete(g.versioned, v)
		}
	}
	return g, nil
}

// readDeclarations parses the package's files: its functions, the
// receiver types that have methods, and (into g.versioned) the package
// variables initialised to a function.
func (g *callGraph) readDeclarations(dir string) ([]*ast.FuncDecl, map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	var decls []*ast.FuncDecl
	receivers := map[string]bool{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "_mock.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				decls = append(decls, d)
				if d.Recv != nil {
					receivers[recvType(d)] = true
				}
			case *ast.GenDecl:
				g.addFunctionVariables(d)
			}
		}
	}
	return decls, receivers, nil
}

// addFunctionVariables records `var nvmlX = nvmlX_v1`-style declarations.
func (g *callGraph) addFunctionVariables(d *ast.GenDecl) {
	for _, s := range d.Specs {
		vs, ok := s.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
			continue
		}
		if id, ok := vs.Values[0].(*ast.Ident); ok {
			name := funcKey(vs.Names[0].Name)
			g.versioned[name] = append(g.versioned[name], funcKey(id.Name))
		}
	}
}

// addFunction records one function: that it is defined, what its body
// calls, the C symbol it calls, and versioned-symbol reassignments in it.
func (g *callGraph) addFunction(d *ast.FuncDecl, receivers map[string]bool) {
	key := funcKey(d.Name.Name)
	if d.Recv != nil {
		key = funcKey(recvType(d) + "." + d.Name.Name)
		g.methods[d.Name.Name] = append(g.methods[d.Name.Name], key)
	}
	g.defined[key] = true
	if d.Body == nil {
		return
	}
	types := paramTypes(d)
	ast.Inspect(d.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt: // nvmlX = nvmlX_v2 in updateVersionedSymbols
			g.addReassignment(n)
		case *ast.CallExpr:
			g.addCall(key, n, types, receivers)
		}
		return true
	})
}

func (g *callGraph) addReassignment(n *ast.AssignStmt) {
	if len(n.Lhs) != 1 || len(n.Rhs) != 1 {
		return
	}
	l, lok := n.Lhs[0].(*ast.Ident)
	r, rok := n.Rhs[0].(*ast.Ident)
	if lok && rok && g.versioned[funcKey(l.Name)] != nil {
		g.versioned[funcKey(l.Name)] = append(g.versioned[funcKey(l.Name)], funcKey(r.Name))
	}
}

// addCall records what key calls: a function, a C symbol, a method of a
// parameter's type, or ("?.Name") a method through a value of unknown type.
func (g *callGraph) addCall(key funcKey, n *ast.CallExpr, types map[string]string, receivers map[string]bool) {
	switch fn := n.Fun.(type) {
	case *ast.Ident:
		g.calls[key] = append(g.calls[key], funcKey(fn.Name))
	case *ast.SelectorExpr:
		x, ok := fn.X.(*ast.Ident)
		var recv string
		typed := false
		if ok {
			recv, typed = types[x.Name]
		}
		switch {
		case !ok:
			g.calls[key] = append(g.calls[key], funcKey("?."+fn.Sel.Name))
		case x.Name == "C":
			g.cSymbol[key] = fn.Sel.Name
		case typed:
			if !receivers[recv] {
				recv = "nvml" + recv // Device -> nvmlDevice
			}
			g.calls[key] = append(g.calls[key], funcKey(recv+"."+fn.Sel.Name))
		default:
			g.calls[key] = append(g.calls[key], funcKey("?."+fn.Sel.Name))
		}
	}
}

// resolveUntypedCalls sends calls through a variable of unknown type to
// every method of that name.
func (g *callGraph) resolveUntypedCalls() {
	for k, cs := range g.calls {
		var out []funcKey
		for _, c := range cs {
			if name, ok := strings.CutPrefix(string(c), "?."); ok {
				out = append(out, g.methods[name]...)
				continue
			}
			out = append(out, c)
		}
		g.calls[k] = out
	}
}

func recvType(d *ast.FuncDecl) string {
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

// paramTypes maps the receiver's and parameters' names to their type names.
func paramTypes(d *ast.FuncDecl) map[string]string {
	out := map[string]string{}
	add := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			t := f.Type
			if s, ok := t.(*ast.StarExpr); ok {
				t = s.X
			}
			id, ok := t.(*ast.Ident)
			if !ok {
				continue
			}
			for _, n := range f.Names {
				out[n.Name] = id.Name
			}
		}
	}
	add(d.Recv)
	add(d.Type.Params)
	return out
}

// requirement is one C symbol a call needs, or several alternatives of
// which go-nvml uses the newest one the library exports.
type requirement []string

// symbolsOf lists what a function needs, following calls within go-nvml.
func (g *callGraph) symbolsOf(k funcKey) []requirement {
	var out []requirement
	seen := map[funcKey]bool{}
	var walk func(k funcKey)
	walk = func(k funcKey) {
		if seen[k] {
			return
		}
		seen[k] = true
		if s := g.cSymbol[k]; s != "" {
			out = append(out, requirement{s})
		}
		if alts, ok := g.versioned[k]; ok {
			var req requirement
			for _, a := range alts {
				for _, r := range g.symbolsOf(a) {
					req = append(req, r...)
				}
			}
			slices.Sort(req)
			out = append(out, slices.Compact(req))
			return
		}
		for _, c := range g.calls[k] {
			walk(c)
		}
	}
	walk(k)
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i], "|") < strings.Join(out[j], "|") })
	return slices.CompactFunc(out, func(a, b requirement) bool { return slices.Equal(a, b) })
}

// methodSymbols maps every method of go-nvml's interfaces to the C symbols
// it calls. Keys are "DeviceGetName" (nvml.Interface) and "Device.GetName".
func methodSymbols(dir string) (map[string][]requirement, error) {
	g, err := readCallGraph(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]requirement{}
	for _, h := range handleInterfaces {
		recv := "library"
		if h.prefix != "" {
			recv = "nvml" + strings.TrimSuffix(h.prefix, ".")
		}
		for method := range h.iface.Methods() {
			name := method.Name
			k := funcKey(recv + "." + name)
			if !g.defined[k] {
				return nil, fmt.Errorf("go-nvml source has no method %s", k)
			}
			out[h.prefix+name] = g.symbolsOf(k)
		}
	}
	return out, nil
}
