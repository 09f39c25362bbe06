package imports_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// pendingNameTags lists packages (relative to the module; "/..." covers
// those below too) that still carry name tags repeating the derived name.
// The test fails once one of them no longer does, so that its entry is
// removed.
var pendingNameTags = []string{}

// Guarantee: no option field carries a `name:"…"` tag equal to the name
// package validate derives from the field by itself (its name with a
// lower-case first letter): a tag says something only where it differs.
func TestNameTagsDoNotRepeatTheDerivedName(t *testing.T) {
	repeats := map[string]int{}
	for _, p := range listPackages(t) {
		rel, _ := strings.CutPrefix(p.importPath, module+"/")
		fset := token.NewFileSet()
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				field, ok := n.(*ast.Field)
				if !ok || field.Tag == nil || len(field.Names) != 1 {
					return true
				}
				tag, _ := strconv.Unquote(field.Tag.Value)
				got, ok := reflect.StructTag(tag).Lookup("name")
				if !ok {
					return true
				}
				goName := field.Names[0].Name
				r, size := utf8.DecodeRuneInString(goName)
				if got != string(unicode.ToLower(r))+goName[size:] {
					return true
				}
				pending := ""
				for _, pat := range pendingNameTags {
					if match(pat, rel) {
						pending = pat
					}
				}
				repeats[pending]++
				if pending == "" {
					t.Errorf("%s: field %s has the tag name:%q, the name validation derives anyway", fset.Position(field.Pos()), goName, got)
				}
				return true
			})
		}
	}
	for _, pat := range pendingNameTags {
		if repeats[pat] == 0 {
			t.Errorf("%s no longer repeats derived names in name tags: remove it from pendingNameTags", pat)
		}
	}
}
