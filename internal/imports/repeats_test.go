package imports_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// allGoFiles lists every Go file of the module's packages, tests
// included, by package path relative to the module.
func allGoFiles(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the module's files: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-f",
		"{{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}",
		module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	files := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		rel, ok := strings.CutPrefix(f[0], module+"/")
		if !ok {
			rel = "."
		}
		for _, name := range f[2:] {
			files[rel] = append(files[rel], filepath.Join(f[1], name))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return files
}

// nilLoggerBlocks reports every `if x == nil { x = slog.Default() }` of f:
// a nil logger defaults in one line, x = cmp.Or(x, slog.Default()).
func nilLoggerBlocks(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		is, ok := n.(*ast.IfStmt)
		if !ok || is.Init != nil || is.Else != nil || len(is.Body.List) != 1 {
			return true
		}
		cond, ok := is.Cond.(*ast.BinaryExpr)
		if !ok || cond.Op != token.EQL || !isNil(cond.Y) {
			return true
		}
		as, ok := is.Body.List[0].(*ast.AssignStmt)
		if !ok || len(as.Rhs) != 1 || len(as.Lhs) != 1 || exprName(as.Lhs[0]) != exprName(cond.X) {
			return true
		}
		if call, ok := as.Rhs[0].(*ast.CallExpr); ok && exprName(call.Fun) == "slog.Default" {
			out = append(out, fmt.Sprintf("%s: if %s == nil { %s = slog.Default() }: write %s = cmp.Or(%s, slog.Default())",
				fset.Position(is.Pos()), exprName(cond.X), exprName(cond.X), exprName(cond.X), exprName(cond.X)))
		}
		return true
	})
	return out
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

// exprName renders a name or selector chain (x, o.Logger, slog.Default), and
// "" for anything else.
func exprName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x := exprName(e.X); x != "" {
			return x + "." + e.Sel.Name
		}
	}
	return ""
}

// pollingHelpers reports every function of f, outside package
// internal/wait, that takes a condition (a func() bool parameter) and
// sleeps: a copy of wait.For or wait.Within.
func pollingHelpers(fset *token.FileSet, f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv != nil || fd.Body == nil {
			continue
		}
		takesCond := false
		for _, p := range fd.Type.Params.List {
			if ft, ok := p.Type.(*ast.FuncType); ok && ft.Params.NumFields() == 0 && ft.Results.NumFields() == 1 {
				if id, ok := ft.Results.List[0].Type.(*ast.Ident); ok && id.Name == "bool" {
					takesCond = true
				}
			}
		}
		if !takesCond {
			continue
		}
		sleeps := false
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && exprName(call.Fun) == "time.Sleep" {
				sleeps = true
			}
			return !sleeps
		})
		if sleeps {
			out = append(out, fmt.Sprintf("%s: %s polls a condition with time.Sleep: use wait.For or wait.Within (internal/wait)",
				fset.Position(fd.Pos()), fd.Name.Name))
		}
	}
	return out
}

// Guarantee: no file of the module (tests included) defaults a nil logger
// with an if block, and none but package internal/wait declares a
// function that polls a condition with time.Sleep: each has one way,
// cmp.Or(x, slog.Default()) and internal/wait.
func TestOneWayToDefaultALoggerAndToWait(t *testing.T) {
	files := allGoFiles(t)
	if len(files) < 20 {
		t.Fatalf("only %d packages listed; the test would check nothing", len(files))
	}
	fset := token.NewFileSet()
	for rel, names := range files {
		for _, name := range names {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range nilLoggerBlocks(fset, f) {
				t.Error(p)
			}
			if rel != "internal/wait" {
				for _, p := range pollingHelpers(fset, f) {
					t.Error(p)
				}
			}
		}
	}
}

// Guarantee: the checks report what they forbid, and only that.
func TestOneWayChecksCatchTheirPatterns(t *testing.T) {
	const src = `package p

func defaults(o Options) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
}

func waitFor(t testing.TB, what string, cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

func until(ctx context.Context, cond func() bool) error { return nil }

func nap() { time.Sleep(time.Millisecond) }

func (s *h) eventually(cond func() bool) { time.Sleep(time.Millisecond) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(append(nilLoggerBlocks(fset, f), pollingHelpers(fset, f)...), "\n")
	for _, want := range []string{"p.go:4:2: if o.Logger == nil", "p.go:13:1: waitFor polls"} {
		if !strings.Contains(got, want) {
			t.Errorf("not reported: %q; reported:\n%s", want, got)
		}
	}
	for _, ok := range []string{"if log == nil", "until", "nap", "eventually"} {
		if strings.Contains(got, ok) {
			t.Errorf("reported %q, which the rules allow:\n%s", ok, got)
		}
	}
}
