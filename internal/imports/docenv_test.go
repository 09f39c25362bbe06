package imports_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// envRead matches an environment variable a file reads by its literal
	// name: os.Getenv("BOULEVARD_X") or testsize.Count(t, "BOULEVARD_X", …).
	envRead = regexp.MustCompile(`(?:os\.Getenv\(|testsize\.Count\(\w+,\s*)"(BOULEVARD_\w+)"`)
	// envReadConst matches testsize.Count given a constant's name.
	envReadConst = regexp.MustCompile(`testsize\.Count\(\w+,\s*(\w+),`)
	// envSet matches a variable a file sets for a process it starts.
	envSet = regexp.MustCompile(`"(BOULEVARD_\w+)=`)
)

// envVarsRead lists the BOULEVARD_ variables the source src reads, without
// those it sets itself for a child process.
func envVarsRead(src string) []string {
	set := map[string]bool{}
	for _, m := range envSet.FindAllStringSubmatch(src, -1) {
		set[m[1]] = true
	}
	var names []string
	for _, m := range envRead.FindAllStringSubmatch(src, -1) {
		names = append(names, m[1])
	}
	for _, m := range envReadConst.FindAllStringSubmatch(src, -1) {
		decl := regexp.MustCompile(`\b` + regexp.QuoteMeta(m[1]) + `\s*=\s*"(BOULEVARD_\w+)"`)
		if d := decl.FindStringSubmatch(src); d != nil {
			names = append(names, d[1])
		}
	}
	return slices.DeleteFunc(names, func(n string) bool { return set[n] })
}

// Guarantee: every environment variable that sizes or steers the module's
// tests is named in docs/testing.md, where one who runs them looks.
func TestEveryTestEnvironmentVariableIsInTestingDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, files := range allGoFiles(t) {
		for _, f := range files {
			if filepath.Base(f) == "docenv_test.go" { // this file's examples
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range envVarsRead(string(src)) {
				seen[name] = true
				if !strings.Contains(string(doc), "`"+name) {
					t.Errorf("%s reads %s, which docs/testing.md does not name", f, name)
				}
			}
		}
	}
	if len(seen) < 10 {
		t.Fatalf("found %d variables the tests read, want the dozen or more that size them: %v", len(seen), seen)
	}
}

func TestEnvVarsReadFindsEachWayOfReading(t *testing.T) {
	src := `
const churnEnv = "BOULEVARD_C"
a := os.Getenv("BOULEVARD_A")
b := testsize.Count(t, "BOULEVARD_B", 1, 2)
c := testsize.Count(t, churnEnv, 1, 1)
cmd.Env = append(os.Environ(), "BOULEVARD_CHILD=1")
if os.Getenv("BOULEVARD_CHILD") != "" {}
`
	got := envVarsRead(src)
	slices.Sort(got)
	if want := []string{"BOULEVARD_A", "BOULEVARD_B", "BOULEVARD_C"}; !slices.Equal(got, want) {
		t.Errorf("envVarsRead = %v, want %v", got, want)
	}
}
