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
// else, quoted as Value quotes.
func TestURLHidesUserInformation(t *testing.T) {
	for in, want := range map[string]string{
		"pulsar://svc:pw@host:6650":          `"pulsar://xxxxx@host:6650"`,
		"pulsar+ssl://token@host:6651/x@y":   `"pulsar+ssl://xxxxx@host:6651/x@y"`,
		"pulsar://svc:p@w d@host:6650?a=b@c": `"pulsar://xxxxx@host:6650?a=b@c"`,
		"svc:pw@kafka:9093":                  `"xxxxx@kafka:9093"`,
		"pulsar://host:6650":                 `"pulsar://host:6650"`,
		"kafka:9092":                         `"kafka:9092"`,
		"":                                   `""`,
	} {
		if got := quote.URL(in); got != want {
			t.Errorf("URL(%q) = %s, want %s", in, got, want)
		}
	}
}
