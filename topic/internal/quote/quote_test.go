package quote_test

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/topic/internal/quote"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// printable reports whether s holds only printable, valid UTF-8.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// Value quotes and escapes a short value whole, and cuts a long one at a
// character boundary, marked with "…" and its length.
func TestValue(t *testing.T) {
	for in, want := range map[string]string{
		"in_memory":     `"in_memory"`,
		"a\nb\x1b[31m":  `"a\nb\x1b[31m"`,
		"\xff":          `"\xff"`,
		"rtl\u202eevil": `"rtl\u202eevil"`,
		"":              `""`,
		"say \"hi\"":    `"say \"hi\""`,
		"é":             `"é"`,
	} {
		if got := quote.Value(in); got != want {
			t.Errorf("Value(%q) = %s, want %s", in, got, want)
		}
	}
	long := strings.Repeat("a", quote.MaxValue-1) + "é" + strings.Repeat("b", 1000)
	got := quote.Value(long)
	want := `"` + strings.Repeat("a", quote.MaxValue-1) + `…" (` + strconv.Itoa(len(long)) + " bytes)"
	if got != want {
		t.Fatalf("Value(long) = %s, want %s (cut before the split é)", got, want)
	}
}

// Text turns line breaks with their indentation into "; ", escapes other
// control characters and invalid UTF-8, keeps quotes as they are, and cuts
// a long message with its length.
func TestText(t *testing.T) {
	in := "yaml: unmarshal errors:\n  line 1: mapping key \"a\x1b\" already defined\r\n\tline 2: \xff"
	want := `yaml: unmarshal errors:; line 1: mapping key "a\x1b" already defined; line 2: \xff`
	if got := quote.Text(in); got != want {
		t.Fatalf("Text = %q, want %q", got, want)
	}
	long := strings.Repeat("\x01", 1<<20)
	got := quote.Text(long)
	if len(got) > quote.MaxText+32 || !strings.HasSuffix(got, "… (1048576 bytes)") || !printable(got) {
		t.Fatalf("Text(1 MiB) = %d bytes ending %q", len(got), got[max(0, len(got)-30):])
	}
}

// Guarantee: URL shows a URL or address without the user information of
// its authority, however the password is written, and keeps everything
// else, quoted and cut as Value quotes and cuts.
func TestURLHidesUserInformation(t *testing.T) {
	for in, want := range map[string]string{
		"pulsar://svc:pw@host:6650":          `"pulsar://xxxxx@host:6650"`,
		"pulsar+ssl://token@host:6651/x@y":   `"pulsar+ssl://xxxxx@host:6651/x@y"`,
		"pulsar://svc:p@w d@host:6650?a=b@c": `"pulsar://xxxxx@host:6650?a=b@c"`,
		"svc:pw@kafka:9093":                  `"xxxxx@kafka:9093"`,
		"svc:pw@kafka:9093#a@b":              `"xxxxx@kafka:9093#a@b"`,
		"pulsar://host:6650":                 `"pulsar://host:6650"`,
		"kafka:9092":                         `"kafka:9092"`,
		"":                                   `""`,
	} {
		if got := quote.URL(in); got != want {
			t.Errorf("URL(%q) = %s, want %s", in, got, want)
		}
	}
	long := "kafka-" + strings.Repeat("h", 2*quote.MaxValue) + ":9092"
	if got, want := quote.URL(long), quote.Value(long); got != want {
		t.Errorf("URL(%d bytes) = %s, want it cut as Value cuts it: %s", len(long), got, want)
	}
}

// Guarantee: a value of exactly MaxValue bytes is shown whole; one byte
// more is cut; a cut never splits a character, however many bytes it
// takes (here a 4-byte one straddling the bound), and a value that is not
// UTF-8 at all is still shown up to a character's length short of the
// bound.
func TestValueCutsOnlyPastMaxValueAndNeverInsideACharacter(t *testing.T) {
	exact := strings.Repeat("a", quote.MaxValue)
	if got := quote.Value(exact); got != strconv.Quote(exact) {
		t.Errorf("Value(%d bytes) = %s, want it whole", quote.MaxValue, got)
	}
	over := exact + "b"
	if want := strconv.Quote(exact+"…") + " (65 bytes)"; quote.Value(over) != want {
		t.Errorf("Value(%d bytes) = %s, want %s", len(over), quote.Value(over), want)
	}
	wide := strings.Repeat("a", quote.MaxValue-2) + "😀" + "tail"
	if want := strconv.Quote(strings.Repeat("a", quote.MaxValue-2)+"…") + " (" + strconv.Itoa(len(wide)) + " bytes)"; quote.Value(wide) != want {
		t.Errorf("Value(%q) = %s, want %s (cut before the split 😀)", wide, quote.Value(wide), want)
	}
	invalid := strings.Repeat("\x80", 2*quote.MaxValue)
	if got := quote.Value(invalid); strings.Count(got, `\x80`) < quote.MaxValue-utf8.UTFMax {
		t.Errorf("Value(%d bytes 0x80) = %s, want at least %d of them shown", len(invalid), got, quote.MaxValue-utf8.UTFMax)
	}
}

// Guarantee: Text bounds what it returns, not only what it is given: a
// short message whose characters escape to several bytes each is cut all
// the same, and the cut never splits a character.
func TestTextIsBoundedAfterEscapingAndCutsBetweenCharacters(t *testing.T) {
	escaped := quote.Text(strings.Repeat("\x01", quote.MaxText))
	if len(escaped) > quote.MaxText+32 || !strings.HasSuffix(escaped, "… (512 bytes)") {
		t.Errorf("Text(%d control bytes) = %d bytes ending %q, want at most %d and the length", quote.MaxText, len(escaped), escaped[max(0, len(escaped)-30):], quote.MaxText+32)
	}
	wide := quote.Text("a" + strings.Repeat("é", quote.MaxText))
	if !utf8.ValidString(wide) || !strings.HasSuffix(wide, "é… (1025 bytes)") {
		t.Errorf("Text(a and %d é) ends %q, want whole characters then its length", quote.MaxText, wide[max(0, len(wide)-30):])
	}
}
