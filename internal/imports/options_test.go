package imports_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pendingOptions lists packages (relative to the module; "/..." covers
// those below too) whose options types do not follow the rule yet. The
// test fails once one of them does, so that its entry is removed.
var pendingOptions = []string{}

// optionsMethods reports, for every exported type whose name is Options or
// ends in Options in the public packages of files (not internal/..., not
// examples/...), what it lacks of the rule: a method WithDefaults() that
// returns the type itself and a method Validate() error, both exported,
// with no parameters and a value receiver, so that every options value can
// be completed and checked the same way.
func optionsMethods(fset *token.FileSet, files []*ast.File) []string {
	type methods struct{ withDefaults, validate bool }
	types := map[string]token.Pos{}
	got := map[string]*methods{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() || !strings.HasSuffix(ts.Name.Name, "Options") {
						continue
					}
					if _, isStruct := ts.Type.(*ast.StructType); !isStruct {
						continue
					}
					types[ts.Name.Name] = ts.Pos()
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 || d.Type.Params.NumFields() != 0 {
					continue
				}
				recv := receiverName(d.Recv.List[0].Type)
				if recv == "" {
					continue // a pointer receiver, or none this test reads
				}
				m := got[recv]
				if m == nil {
					m = &methods{}
					got[recv] = m
				}
				results := d.Type.Results
				switch d.Name.Name {
				case "WithDefaults":
					m.withDefaults = results.NumFields() == 1 && receiverName(results.List[0].Type) == recv
				case "Validate":
					if results.NumFields() == 1 {
						id, ok := results.List[0].Type.(*ast.Ident)
						m.validate = ok && id.Name == "error"
					}
				}
			}
		}
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(types)) {
		m := got[name]
		if m == nil {
			m = &methods{}
		}
		if !m.withDefaults {
			out = append(out, fmt.Sprintf("%s: %s has no method WithDefaults() %s (value receiver, no parameters)", fset.Position(types[name]), name, name))
		}
		if !m.validate {
			out = append(out, fmt.Sprintf("%s: %s has no method Validate() error (value receiver, no parameters)", fset.Position(types[name]), name))
		}
	}
	return out
}

// receiverName returns the name of the type expr names when it is a plain
// or generic named type (T, T[X], T[X, Y]), and "" otherwise (a pointer,
// a qualified name).
func receiverName(expr ast.Expr) string {
	switch e := expr.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return receiverName(e.X)
	case *ast.IndexListExpr:
		return receiverName(e.X)
	}
	return ""
}

// Guarantee: every exported options type of the public packages (a type
// named Options or ending in Options, examples apart) has WithDefaults()
// and Validate() error, so that every options value is completed and
// checked the same way.
func TestOptionsHaveWithDefaultsAndValidate(t *testing.T) {
	broken := map[string]int{}
	checked := 0
	for _, p := range listPackages(t) {
		rel, _ := strings.CutPrefix(p.importPath, module+"/")
		if match("examples/...", rel) || rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || strings.HasSuffix(rel, "/internal") {
			continue
		}
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		checked++
		pending := ""
		for _, pat := range pendingOptions {
			if match(pat, rel) {
				pending = pat
			}
		}
		for _, problem := range optionsMethods(fset, files) {
			broken[pending]++
			if pending == "" {
				t.Error(problem)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d public packages read; the test would check nothing", checked)
	}
	for _, pat := range pendingOptions {
		if broken[pat] == 0 {
			t.Errorf("%s follows the options rule: remove it from pendingOptions", pat)
		}
	}
}

// Guarantee: the options check reports an options type that lacks either
// method, or has it with the wrong shape (a pointer receiver, a parameter,
// another result), and accepts one that follows the rule, generic or not.
func TestOptionsCheckCatchesMissingMethods(t *testing.T) {
	const src = `package p

type Options[T any] struct{ X T }

func (o Options[T]) WithDefaults() Options[T] { return o }
func (o Options[T]) Validate() error          { return nil }

type GoodOptions struct{}

func (o GoodOptions) WithDefaults() GoodOptions { return o }
func (o GoodOptions) Validate() error           { return nil }

type NoDefaultsOptions struct{}

func (o NoDefaultsOptions) Validate() error { return nil }

type PointerOptions struct{}

func (o *PointerOptions) WithDefaults() PointerOptions { return *o }
func (o PointerOptions) Validate() error              { return nil }

type PathOptions struct{}

func (o PathOptions) WithDefaults() PathOptions     { return o }
func (o PathOptions) Validate(path string) error     { return nil }

type BoolOptions struct{}

func (o BoolOptions) WithDefaults() BoolOptions { return o }
func (o BoolOptions) Validate() bool            { return true }

type unexportedOptions struct{}

type Settings struct{}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(optionsMethods(fset, []*ast.File{f}), "\n")
	for _, want := range []string{
		"NoDefaultsOptions has no method WithDefaults()",
		"PointerOptions has no method WithDefaults()",
		"PathOptions has no method Validate()",
		"BoolOptions has no method Validate()",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("not reported: %q; reported:\n%s", want, got)
		}
	}
	for _, ok := range []string{"p.go:3:6: Options ", "GoodOptions", "unexportedOptions", "Settings", "NoDefaultsOptions has no method Validate", "BoolOptions has no method WithDefaults"} {
		if strings.Contains(got, ok) {
			t.Errorf("reported %q, which follows the rule or is not an options type:\n%s", ok, got)
		}
	}
}
