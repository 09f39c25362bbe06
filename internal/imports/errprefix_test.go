package imports_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// listed is one package of the module as go list describes it.
type listed struct {
	importPath, name, dir string
	files                 []string
}

// listPackages lists every package of the module with its non-test Go
// files.
func listPackages(t *testing.T) []listed {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the module's packages: %v", err)
	}
	cmd := exec.Command(goTool, "list", "-e", "-f", "{{.ImportPath}} {{.Name}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listed
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		pkgs = append(pkgs, listed{importPath: f[0], name: f[1], dir: f[2], files: f[3:]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// sentinel is a package-level error variable: its message when it is
// errors.New of a literal, or the variable it is set to (pkg.Name, another
// package's sentinel re-exported).
type sentinel struct {
	msg         string
	aliasImport string
	aliasName   string
}

// sentinels returns the package-level variables of p set to errors.New("…")
// or to a variable of an imported package, by name.
func sentinels(t *testing.T, p listed) map[string]sentinel {
	t.Helper()
	out := map[string]sentinel{}
	fset := token.NewFileSet()
	for _, name := range p.files {
		f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]string{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imports[local] = path
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					switch v := vs.Values[i].(type) {
					case *ast.CallExpr:
						if fn, ok := v.Fun.(*ast.SelectorExpr); ok && len(v.Args) == 1 {
							pkg, _ := fn.X.(*ast.Ident)
							lit, isLit := v.Args[0].(*ast.BasicLit)
							if pkg != nil && imports[pkg.Name] == "errors" && fn.Sel.Name == "New" && isLit && lit.Kind == token.STRING {
								msg, _ := strconv.Unquote(lit.Value)
								out[n.Name] = sentinel{msg: msg}
							}
						}
					case *ast.SelectorExpr:
						if pkg, ok := v.X.(*ast.Ident); ok && imports[pkg.Name] != "" && strings.HasPrefix(v.Sel.Name, "Err") {
							out[n.Name] = sentinel{aliasImport: imports[pkg.Name], aliasName: v.Sel.Name}
						}
					}
				}
			}
		}
	}
	return out
}

// exempt are sentinels that head errors returned on behalf of other
// packages, whose name comes right after: validate.ErrInvalid heads
// "invalid options: kafka.brokers is required", where the option path is
// rooted at the package that validated.
var exempt = map[string]bool{"validate.ErrInvalid": true}

// pending lists packages (relative to the module) whose sentinels do not
// all read "<package>: …" yet. The test fails once they all do, so that
// the entry is removed.
var pending = map[string]bool{}

// Guarantee: every exported sentinel error (an exported package-level
// errors.New) reads "<package>: …", the name of the package a user imports
// it from, so that a message tells where it came from. A sentinel of an
// internal package that public ones re-export (topic.ErrTopicClosed is
// internal/queue's ErrClosed; kafka and franz share their sentinels)
// carries the name of one of them.
func TestSentinelErrorsNameTheirPackage(t *testing.T) {
	pkgs := listPackages(t)
	byPath := map[string]map[string]sentinel{}
	for _, p := range pkgs {
		byPath[p.importPath] = sentinels(t, p)
	}
	type use struct{ pkg, name, path string }
	uses := map[string][]use{} // message → where users import it from
	for _, p := range pkgs {
		if strings.Contains(p.importPath+"/", "/internal/") || p.name == "main" {
			continue // not imported by users; see re-exports
		}
		for name, s := range byPath[p.importPath] {
			if !ast.IsExported(name) || exempt[p.name+"."+name] {
				continue
			}
			msg := s.msg
			if s.aliasImport != "" {
				other, ok := byPath[s.aliasImport][s.aliasName]
				if !ok || other.aliasImport != "" {
					continue // not one of the module's literal sentinels
				}
				msg = other.msg
			}
			if msg != "" {
				uses[msg] = append(uses[msg], use{p.name, name, p.importPath})
			}
		}
	}
	if len(uses) < 20 {
		t.Fatalf("only %d sentinels found: the scan is broken", len(uses))
	}
	stray := map[string]int{} // pending package → its sentinels that do not conform
	for msg, us := range uses {
		ok := false
		for _, u := range us {
			ok = ok || strings.HasPrefix(msg, u.pkg+": ")
		}
		for _, u := range us {
			rel, _ := strings.CutPrefix(u.path, module+"/")
			switch {
			case pending[rel]:
				if !ok {
					stray[rel]++
				}
			case !ok:
				t.Errorf("%s.%s (%s) reads %q, want it to start with %q", u.pkg, u.name, u.path, msg, u.pkg+": ")
			}
		}
	}
	for rel := range pending {
		if stray[rel] == 0 {
			t.Errorf("every sentinel of %s reads \"<package>: …\" now: remove it from pending", rel)
		}
	}
}
