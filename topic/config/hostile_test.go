package config_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/config"
	"github.com/boulevard-go/boulevard/validate"
)

// evil is a value that would forge a log line and colour a terminal if an
// error printed it raw.
const evil = "auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"

// maxErrorLen bounds the text of any error of Parse: MaxListedErrors
// entries, each with a path of a few names of at most 249 bytes and values
// cut after 64 bytes.
const maxErrorLen = 64 << 10

// safeText fails the test if msg holds a control character, any other
// non-printable character or invalid UTF-8.
func safeText(t testing.TB, what, msg string) {
	t.Helper()
	for i, r := range msg {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			t.Fatalf("%s: error holds %q at byte %d: %.300q", what, r, i, msg)
		}
	}
}

// yamlString writes s as a double-quoted YAML scalar (YAML's escapes
// include Go's \n, \t, \xNN and \uNNNN).
func yamlString(s string) string { return strconv.QuoteToASCII(s) }

// laughs is a document whose topics merge the one before nine times over:
// a few hundred bytes that expand to 9^levels merged mappings, each holding
// leaf.
func laughs(levels int, leaf string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "topics:\n  x: &x {%s}\n", leaf)
	prev := "x"
	for i := 1; i <= levels; i++ {
		name := fmt.Sprintf("l%d", i)
		refs := strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ",")
		fmt.Fprintf(&b, "  %s: &%s {<<: [%s]}\n", name, name, refs)
		prev = name
	}
	return []byte(b.String())
}

// Names in a document are restricted to the character set of topic names,
// and every string of the document an error repeats (names, unknown keys,
// values) is quoted and escaped.
func TestParseEscapesEveryUserString(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"newline in a topic name", "topics:\n  " + yamlString("a\nb") + ": {}\n", `topics."a\nb" name has "\n" at byte 1`},
		{"escape in a group name", "groups:\n  " + yamlString("g\x1b[31m") + ": {topics: {t: {}}}\n", `groups."g\x1b[31m" name has "\x1b" at byte 1`},
		{"space in a group topic", "groups:\n  g:\n    topics:\n      " + yamlString("a b") + ": {}\n", `groups.g.topics."a b" name has " " at byte 1`},
		{"unknown key", "topics:\n  t:\n    " + yamlString("bogus\n"+evil) + ": 1\n", `topics.t."bogus\nauto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED" is not a known key`},
		{"on_lag", "topics:\n  t:\n    policies:\n      broadcast:\n        on_lag: " + yamlString(evil) + "\n        ack_mode: all\n      ack_propagation: {mode: auto}\n",
			`requires policies.broadcast.on_lag disconnect, not "auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"`},
		{"mode", "topics:\n  t:\n    policies:\n      broadcast: {on_lag: disconnect, ack_mode: all}\n      ack_propagation:\n        mode: " + yamlString(evil) + "\n",
			`requires policies.ack_propagation.mode auto, not "auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"`},
		{"timeout", "topics:\n  t:\n    policies:\n      ack_propagation:\n        timeout: " + yamlString(evil) + "\n",
			`must be a duration such as 30s or 1m30s, not "auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"`},
		{"integer", "topics:\n  t:\n    policies:\n      balanced:\n        queue_capacity: " + yamlString(evil) + "\n",
			`must be an integer, not "auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.doc))
			if err == nil {
				t.Fatal("Parse accepted the document")
			}
			safeText(t, "Parse", err.Error())
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			if !errors.Is(err, validate.ErrInvalid) {
				t.Fatalf("error %v does not wrap validate.ErrInvalid", err)
			}
		})
	}
	// A document whose YAML the library rejects with the offending text in
	// its message: the message is made safe too.
	_, err := config.Parse([]byte("topics:\n  " + yamlString("k\x1b") + ": {}\n  " + yamlString("k\x1b") + ": {}\n"))
	if err == nil {
		t.Fatal("Parse accepted a repeated key")
	}
	safeText(t, "Parse", err.Error())
}

// Names and references in a wiring, and backend names, are checked and
// escaped in the errors of Resolve and Build.
func TestResolveAndBuildEscapeUserStrings(t *testing.T) {
	cfg := mustParse(t, threeTopics)
	for _, w := range []config.Wiring{
		{Pipelines: []config.Pipeline{{Name: "p", Subscribes: []config.Subscribe{{Topic: evil}}}}},
		{Pipelines: []config.Pipeline{{Name: "p", Group: evil, Publishes: []config.Publish{{Topic: evil}}}}},
		{Pipelines: []config.Pipeline{{Name: evil, Subscribes: []config.Subscribe{{Topic: "t1"}}}}},
		{Pipelines: []config.Pipeline{{Name: "p", Subscribes: []config.Subscribe{{Topic: "t1", ConsumerGroup: evil}}}}},
		{Pipelines: []config.Pipeline{{Name: evil}, {Name: evil}}},
	} {
		_, err := config.Resolve(cfg, w)
		if err == nil {
			t.Fatalf("Resolve accepted %+v", w)
		}
		safeText(t, "Resolve", err.Error())
		if !strings.Contains(err.Error(), `"auto, not evil\nlevel=ERROR msg=FORGED\x1b[31mRED"`) {
			t.Fatalf("error %q does not show the name quoted and escaped", err)
		}
	}
	// A Config built by hand is held to the same names.
	_, err := config.Resolve(&config.Config{Topics: map[string]config.TopicSpec{evil: config.DefaultTopicSpec()}}, config.Wiring{})
	if err == nil {
		t.Fatal("Resolve accepted a hand-built topic name with control characters")
	}
	safeText(t, "Resolve", err.Error())

	spec := config.DefaultTopicSpec()
	spec.Backend = evil
	plan, err := config.Resolve(&config.Config{Topics: map[string]config.TopicSpec{"t": spec}}, config.Wiring{})
	if err != nil {
		t.Fatal(err)
	}
	broker := topic.NewBroker[int]()
	defer broker.Close()
	_, err = config.Build(broker, plan)
	if !errors.Is(err, topic.ErrUnsupportedBackend) {
		t.Fatalf("Build = %v, want ErrUnsupportedBackend", err)
	}
	safeText(t, "Build", err.Error())
	// So is the path of a TopicError made by hand.
	msg := (&config.TopicError{Path: evil, Err: errors.New("cause")}).Error()
	safeText(t, "TopicError", msg)
	if !strings.HasSuffix(msg, ": cause") {
		t.Fatalf("TopicError = %q, want the quoted path then the cause", msg)
	}
}

// Aliases and merge keys cannot amplify a small document into unbounded
// work or an unbounded error: past MaxAliasNodes expanded nodes, or on an
// anchor used inside itself, Parse stops with ErrTooManyAliases.
func TestParseBoundsAliasExpansion(t *testing.T) {
	for name, doc := range map[string][]byte{
		"unknown keys, 9^6 merges":  laughs(6, "bogus: 1"),
		"valid keys, 9^7 merges":    laughs(7, "policies: {balanced: {queue_capacity: 1}}"),
		"nested sequences":          []byte("a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ntopics:\n  t: {<<: [*d,*d,*d,*d,*d,*d,*d,*d,*d]}\n"),
		"anchor used inside itself": []byte("topics:\n  a: &a {<<: *a}\n"),
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := config.Parse(doc)
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("Parse accepted the document")
			}
			if len(err.Error()) > 1024 {
				t.Fatalf("error of %d bytes for a %d-byte document", len(err.Error()), len(doc))
			}
			if elapsed > 5*time.Second {
				t.Fatalf("Parse took %v", elapsed)
			}
			if !errors.Is(err, config.ErrTooManyAliases) && !errors.Is(err, validate.ErrInvalid) {
				t.Fatalf("got %v, want ErrTooManyAliases or a validation error", err)
			}
		})
	}
	if _, err := config.Parse(laughs(6, "bogus: 1")); !errors.Is(err, config.ErrTooManyAliases) {
		t.Fatalf("got %v, want ErrTooManyAliases", err)
	}
	if _, err := config.Parse([]byte("topics:\n  a: &a {<<: *a}\n")); err == nil || !strings.Contains(err.Error(), "used inside its own value") {
		t.Fatalf("got %v, want the self-referring anchor named", err)
	}
	// Within the limit, aliases work (see TestParseAnchors too).
	cfg, err := config.Parse(laughs(2, "policies: {balanced: {queue_capacity: 3}}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Topics["l2"].Policies.Balanced.QueueCapacity; got != 3 {
		t.Fatalf("merged queue_capacity = %d, want 3", got)
	}
}

// Mappings are bounded before the strict decode, which compares every pair
// of keys of a mapping: a mapping holds at most MaxMappingKeys keys, a
// document declares at most MaxTopics topics, and a repeated key is named
// once, not once per pair.
func TestParseBoundsMappings(t *testing.T) {
	var wide strings.Builder
	wide.WriteString("topics:\n")
	for i := range config.MaxMappingKeys + 1 {
		fmt.Fprintf(&wide, "  t%d: {}\n", i)
	}
	_, err := config.Parse([]byte(wide.String()))
	if err == nil || err.Error() != "invalid options: topics has 1001 keys, more than 1000 (line 2)" {
		t.Fatalf("got %v, want the mapping's size named", err)
	}
	var split strings.Builder
	split.WriteString("groups:\n")
	for g := range 2 {
		fmt.Fprintf(&split, "  g%d:\n    topics:\n", g)
		for i := range config.MaxTopics/2 + 1 {
			fmt.Fprintf(&split, "      t%d: {}\n", i)
		}
	}
	_, err = config.Parse([]byte(split.String()))
	if err == nil || !strings.Contains(err.Error(), "groups.g1.topics brings the document to more than 1000 topic declarations") {
		t.Fatalf("got %v, want the topic count named", err)
	}
	// One declaration past MaxTopics, global and group-scoped together.
	var over strings.Builder
	over.WriteString("topics:\n")
	for i := range config.MaxTopics / 2 {
		fmt.Fprintf(&over, "  t%d: {}\n", i)
	}
	over.WriteString("groups:\n  g:\n    topics:\n")
	for i := range config.MaxTopics/2 + 1 {
		fmt.Fprintf(&over, "      t%d: {}\n", i)
	}
	_, err = config.Parse([]byte(over.String()))
	if err == nil || !strings.Contains(err.Error(), "brings the document to more than 1000 topic declarations") {
		t.Fatalf("%d topic declarations: got %v, want the topic count named", config.MaxTopics+1, err)
	}
	// A list holds at most MaxMappingKeys items.
	long := "connections:\n  k: {kind: kafka, brokers: [" + strings.TrimSuffix(strings.Repeat("\"x:1\", ", config.MaxMappingKeys+1), ", ") + "]}\n"
	_, err = config.Parse([]byte(long))
	if err == nil || !strings.Contains(err.Error(), "connections.k.brokers has 1001 items, more than 1000") {
		t.Fatalf("a list of %d items: got %v, want its length named", config.MaxMappingKeys+1, err)
	}
	var dup strings.Builder
	dup.WriteString("topics:\n  t:\n")
	for range config.MaxMappingKeys {
		dup.WriteString("    backend: in_memory\n")
	}
	start := time.Now()
	_, err = config.Parse([]byte(dup.String()))
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("topics.t.backend", "unique") || !strings.HasSuffix(err.Error(), fmt.Sprintf("and %d more", config.MaxMappingKeys-1-config.MaxListedErrors)) {
		t.Fatalf("got %v, want each repeated key once", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("Parse took %v", elapsed)
	}
	// At the bounds, a document is accepted.
	var full strings.Builder
	full.WriteString("topics:\n")
	for i := range config.MaxTopics {
		fmt.Fprintf(&full, "  t%d: {policies: {balanced: {queue_capacity: 8}}}\n", i)
	}
	cfg, err := config.Parse([]byte(full.String()))
	if err != nil || len(cfg.Topics) != config.MaxTopics {
		t.Fatalf("a document of %d topics: %v", config.MaxTopics, err)
	}
	// Every topic written whole through an alias stays within MaxAliasNodes.
	var aliased strings.Builder
	aliased.WriteString("topics:\n  t0: &full {backend: in_memory, impl_selection: auto, policies: {" +
		"balanced: {queue_capacity: 8, on_full: block}, broadcast: {queue_capacity: 8, on_lag: disconnect, ack_mode: first}, " +
		"ack_propagation: {mode: auto, max_in_flight: 4, timeout: 5s}}}\n")
	for i := 1; i < config.MaxTopics; i++ {
		fmt.Fprintf(&aliased, "  t%d: *full\n", i)
	}
	cfg, err = config.Parse([]byte(aliased.String()))
	if err != nil || len(cfg.Topics) != config.MaxTopics || cfg.Topics["t999"].Policies.AckPropagation.MaxInFlight != 4 {
		t.Fatalf("%d topics through one alias: %v", config.MaxTopics, err)
	}
}

// A document larger than MaxDocumentSize is refused before it is parsed,
// with an error naming both sizes.
func TestParseRejectsOversizedDocument(t *testing.T) {
	doc := []byte("topics:\n  t: {}\n" + strings.Repeat("#", config.MaxDocumentSize))
	_, err := config.Parse(doc)
	if !errors.Is(err, config.ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	for _, n := range []int{len(doc), config.MaxDocumentSize} {
		if !strings.Contains(err.Error(), strconv.Itoa(n)+" bytes") {
			t.Fatalf("error %q does not name %d bytes", err, n)
		}
	}
	if _, err := config.Parse(doc[:config.MaxDocumentSize]); err != nil {
		t.Fatalf("a document of exactly MaxDocumentSize bytes: %v", err)
	}
	if _, err := config.Parse(doc[:config.MaxDocumentSize+1]); !errors.Is(err, config.ErrTooLarge) {
		t.Fatalf("a document of MaxDocumentSize+1 bytes: got %v, want ErrTooLarge", err)
	}
}

// Errors stay small whatever the input: long values and names are cut with
// their length, and a list of problems stops after MaxListedErrors with
// "and N more".
func TestParseErrorSizeIsBounded(t *testing.T) {
	big := strings.Repeat("a", 1<<20-100)
	_, err := config.Parse([]byte("topics:\n  t:\n    policies:\n      balanced:\n        queue_capacity: " + big + "\n"))
	if err == nil || len(err.Error()) > 1024 || !strings.Contains(err.Error(), fmt.Sprintf("…\" (%d bytes)", len(big))) {
		t.Fatalf("error for a long value: %.300q (%d bytes)", err, len(fmt.Sprint(err)))
	}
	// A long topic name with three bad fields: the name is shown once, cut.
	_, err = config.Parse([]byte("topics:\n  " + big + ":\n    policies:\n      balanced: {queue_capacity: 0, on_full: x}\n      broadcast: {on_lag: y}\n"))
	if err == nil || len(err.Error()) > 4096 {
		t.Fatalf("error for a long name: %d bytes", len(fmt.Sprint(err)))
	}
	var b strings.Builder
	b.WriteString("topics:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  t%d: {policies: {balanced: {queue_capacity: 0}}}\n", i)
	}
	_, err = config.Parse([]byte(b.String()))
	var es validate.Errors
	if !errors.As(err, &es) || len(es) != config.MaxListedErrors+1 || !strings.HasSuffix(err.Error(), "; and 80 more") {
		t.Fatalf("got %d entries ending %q, want %d and \"and 80 more\"", len(es), err.Error()[max(0, len(err.Error())-40):], config.MaxListedErrors)
	}
	// The same cap holds for Resolve.
	var w config.Wiring
	for i := range 50 {
		w.Pipelines = append(w.Pipelines, config.Pipeline{Name: fmt.Sprintf("p%d", i), Subscribes: []config.Subscribe{{Topic: "nope"}}})
	}
	_, err = config.Resolve(mustParse(t, threeTopics), w)
	if !errors.As(err, &es) || len(es) != config.MaxListedErrors+1 || !strings.HasSuffix(err.Error(), "; and 30 more") {
		t.Fatalf("Resolve: got %d entries, error ending %q", len(es), err.Error()[max(0, len(err.Error())-40):])
	}
}

// Every size option has an upper bound checked at parse time: extreme
// values are errors naming the key and the bound, never an allocation that
// panics or exhausts memory in Load; the bound itself is accepted.
func TestParseOptionUpperBounds(t *testing.T) {
	keys := map[string]string{
		"topics.t.policies.balanced.queue_capacity":       "{policies: {balanced: {queue_capacity: %s}}}",
		"topics.t.policies.broadcast.queue_capacity":      "{policies: {broadcast: {queue_capacity: %s}}}",
		"topics.t.policies.ack_propagation.max_in_flight": "{policies: {ack_propagation: {max_in_flight: %s}}}",
	}
	wiring := config.Wiring{Pipelines: []config.Pipeline{{Name: "b", Subscribes: []config.Subscribe{{Topic: "t", Mode: config.Broadcast}}}}}
	for field, tmpl := range keys {
		for _, v := range []string{strconv.Itoa(topic.MaxCapacity + 1), "100000000000", strconv.Itoa(math.MaxInt), "0x7fffffffffffffff"} {
			doc := []byte("topics:\n  t: " + fmt.Sprintf(tmpl, v) + "\n")
			broker := topic.NewBroker[int]()
			_, err := config.Load(doc, wiring, broker)
			broker.Close()
			var es validate.Errors
			if !errors.As(err, &es) || !es.Has(field, "lte") || !strings.Contains(err.Error(), field+" must be ≤ 1048576") {
				t.Fatalf("%s: %s: got %v, want %s must be ≤ 1048576", field, v, err, field)
			}
		}
		for _, v := range []string{"99999999999999999999", "1e12"} {
			_, err := config.Parse([]byte("topics:\n  t: " + fmt.Sprintf(tmpl, v) + "\n"))
			if err == nil || !strings.Contains(err.Error(), field+" must be an integer") {
				t.Fatalf("%s: %s: got %v, want an integer error", field, v, err)
			}
		}
		if _, err := config.Parse([]byte("topics:\n  t: " + fmt.Sprintf(tmpl, strconv.Itoa(topic.MaxCapacity)) + "\n")); err != nil {
			t.Fatalf("%s at the bound: %v", field, err)
		}
	}
}

// yamlBlocks returns the YAML documents of the repository's example and
// docs, to seed the fuzz corpus with real configurations.
func yamlBlocks(t testing.TB) [][]byte {
	var out [][]byte
	if src, err := os.ReadFile("../../examples/topics/run.go"); err == nil {
		for _, m := range regexp.MustCompile("(?s)const topicsYAML = `(.*?)`").FindAllSubmatch(src, -1) {
			out = append(out, m[1])
		}
	}
	if md, err := os.ReadFile("../../docs/topic-config.md"); err == nil {
		for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(md, -1) {
			out = append(out, m[1])
		}
	}
	if len(out) < 2 {
		t.Fatalf("found %d example documents, want the example's and the docs'", len(out))
	}
	return out
}

// For any input, Parse never panics, returns within a bounded time, and
// either succeeds or returns an error of bounded length that holds no
// control character or other non-printable character.
func FuzzParse(f *testing.F) {
	for _, doc := range yamlBlocks(f) {
		f.Add(doc)
	}
	for _, doc := range [][]byte{
		laughs(6, "bogus: 1"),
		laughs(7, "policies: {balanced: {queue_capacity: 1}}"),
		[]byte("topics:\n  a: &a {<<: *a}\n"),
		[]byte("topics:\n  " + yamlString("a\nb") + ": {}\n"),
		[]byte("topics:\n  t:\n    policies:\n      ack_propagation:\n        mode: " + yamlString(evil) + "\n      broadcast: {ack_mode: all}\n"),
		[]byte("topics:\n  t:\n    policies:\n      balanced: {queue_capacity: 100000000000}\n"),
		[]byte("topics:\n  t:\n    policies:\n      broadcast: {queue_capacity: 9223372036854775807}\n"),
		[]byte("topics:\n  t: {backend: " + yamlString("k\x1b[0m") + "}\n"),
		[]byte("topics:\n  " + strings.Repeat("n", 300) + ": {policies: {balanced: {on_full: " + strings.Repeat("v", 300) + "}}}\n"),
		[]byte("groups:\n  g:\n    topics:\n      ? [a, b]\n      : {}\n"),
		[]byte("topics:\n  a: [\n"),
		[]byte("\xff\xfe\x00"),
		nil,
	} {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		start := time.Now()
		_, err := config.Parse(doc)
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Fatalf("Parse of %d bytes took %v", len(doc), elapsed)
		}
		if err == nil {
			return
		}
		msg := err.Error()
		if len(msg) > maxErrorLen {
			t.Fatalf("error of %d bytes for %d bytes of input", len(msg), len(doc))
		}
		safeText(t, "Parse", msg)
	})
}

// A document of many topics, each at the largest queue capacity, is
// rejected as a whole: the sum of the capacities is bounded, so Load never
// sets aside more than MaxTotalCapacity queue slots for one document.
func TestParseBoundsTotalCapacity(t *testing.T) {
	doc := func(topics int) []byte {
		var b strings.Builder
		b.WriteString("topics:\n")
		for i := range topics {
			fmt.Fprintf(&b, "  t%d: {policies: {balanced: {queue_capacity: %d}, broadcast: {queue_capacity: 1}}}\n", i, topic.MaxCapacity)
		}
		return []byte(b.String())
	}
	// The largest number of such topics that fits, and one more.
	fit := config.MaxTotalCapacity / (topic.MaxCapacity + 1)
	if _, err := config.Parse(doc(fit)); err != nil {
		t.Fatalf("%d topics within the total: %v", fit, err)
	}
	_, err := config.Parse(doc(fit + 1))
	var es validate.Errors
	if !errors.As(err, &es) || !es.Has("topics", "lte") || !strings.Contains(err.Error(), "more than the limit of 8388608") {
		t.Fatalf("%d topics over the total: got %v, want a topics lte error naming the limit", fit+1, err)
	}
}

// The total capacity counts group-scoped topics too, and a document that
// reaches MaxTotalCapacity exactly is accepted.
func TestParseTotalCapacityBoundIsExactAndCountsGroups(t *testing.T) {
	doc := func(groupBalanced int) []byte {
		var b strings.Builder
		b.WriteString("topics:\n")
		for i := range 7 {
			fmt.Fprintf(&b, "  t%d: {policies: {balanced: {queue_capacity: %d}, broadcast: {queue_capacity: 1}}}\n", i, topic.MaxCapacity)
		}
		fmt.Fprintf(&b, "groups:\n  g:\n    topics:\n      t: {policies: {balanced: {queue_capacity: %d}, broadcast: {queue_capacity: 1}}}\n", groupBalanced)
		return []byte(b.String())
	}
	// 7 global topics hold 7 × (MaxCapacity + 1); the group's topic the rest.
	rest := config.MaxTotalCapacity - 7*(topic.MaxCapacity+1) - 1
	if _, err := config.Parse(doc(rest)); err != nil {
		t.Fatalf("a document at exactly MaxTotalCapacity: %v", err)
	}
	_, err := config.Parse(doc(rest + 1))
	if err == nil || !strings.Contains(err.Error(), "queue capacities add up to 8388609 messages") {
		t.Fatalf("a document one message over MaxTotalCapacity (in a group-scoped topic): got %v, want the total named", err)
	}
}
