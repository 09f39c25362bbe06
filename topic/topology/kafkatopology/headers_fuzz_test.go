package kafkatopology

import (
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/fuzzcheck"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// splitHeaders reads b (fuzzcheck.Pairs) as sarama hands a record's
// headers over.
func splitHeaders(b []byte) []*sarama.RecordHeader {
	var hs []*sarama.RecordHeader
	fuzzcheck.Split(b, func(k, v []byte) { hs = append(hs, &sarama.RecordHeader{Key: k, Value: v}) })
	return hs
}

// record returns the record a consumer reads for headers hs, as the
// producer wrote them, with key key and value value.
func record(key string, value []byte, hs []sarama.RecordHeader) *sarama.ConsumerMessage {
	rec := &sarama.ConsumerMessage{Topic: "t", Value: value}
	if key != "" {
		rec.Key = []byte(key)
	}
	for i := range hs {
		rec.Headers = append(rec.Headers, &hs[i])
	}
	return rec
}

// fuzzBackend is a backend with what decodeLetter reads, its codec, and
// a logger that discards what it is given.
func fuzzBackend() *Backend[topologytest.Msg] {
	return &Backend[topologytest.Msg]{
		opts: Options[topologytest.Msg]{Codec: topic.JSONCodec[topologytest.Msg]{}},
		log:  slog.New(slog.DiscardHandler),
	}
}

var (
	countHeaders = []string{HeaderShard, HeaderRetries, HeaderDeathRetries}
	timeHeaders  = []string{HeaderFirstFailure, HeaderLastFailure, HeaderDue, HeaderDeathFirstFailure, HeaderDeathLastFailure}
)

// malformed returns why a record with headers hs does not hold a letter's
// history ("" when it does): a count header that is not a decimal from 0
// to its bound, a time header that is not RFC 3339 of the years 0 to 9999
// UTC (what timeHeader writes), a Resume that is neither "1" nor "0".
func malformed(hs []*sarama.RecordHeader) string {
	for _, h := range hs {
		k, v := string(h.Key), string(h.Value)
		switch {
		case slices.Contains(countHeaders, k):
			limit := int64(topology.MaxRetriesLimit)
			if k == HeaderShard {
				limit = topology.MaxRoutingShards - 1
			}
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || n > limit {
				return "header " + k + "=" + strconv.Quote(v)
			}
		case k == HeaderResume:
			if v != "1" && v != "0" {
				return k + "=" + strconv.Quote(v)
			}
		case slices.Contains(timeHeaders, k):
			if t, err := time.Parse(time.RFC3339Nano, v); err != nil || t.UTC().Year() < 0 || t.UTC().Year() > 9999 {
				return k + "=" + strconv.Quote(v)
			}
		}
	}
	return ""
}

// Guarantee: for any headers, key and value another producer (kcat) may
// write, decodeLetter never panics, allocates in proportion to the record
// only, and either decodes a letter or returns an error of bounded length
// that is safe to log; it returns an error exactly when a history header
// is malformed (a count that is not a decimal within its bound, a time
// that is not RFC 3339 or that the encoder cannot write back, a Resume
// that is neither "1" nor "0") or the value does not decode, never a
// wrong value. A letter it decodes reads back the same once encoded again.
func FuzzDecodeLetter(f *testing.F) {
	valid := record("", nil, letterHeaders(&topology.Letter[topologytest.Msg]{Shard: 3, Retries: 2,
		FirstFailure: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), LastFailure: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC),
		Resume: true, Death: &topology.Death{Reason: topology.ReasonMaxRetries, Error: "boom\nline two", Topic: "orders",
			Group: "billing", Retries: 10, FirstFailure: time.Unix(1, 0), LastFailure: time.Unix(2, 5)}}, nil))
	var letter []string
	for _, h := range valid.Headers {
		letter = append(letter, string(h.Key), string(h.Value))
	}
	value := []byte(`{"key":"A","n":1}`)
	long := strings.Repeat("9", 2<<10) // longer than fuzzcheck.MaxErrorText
	for _, seed := range []struct {
		hdrs       []byte
		key, value string
	}{
		{fuzzcheck.Pairs(letter...), "A", string(value)},
		{fuzzcheck.Pairs(HeaderDue, "2026-01-02T03:04:05.123456789Z", HeaderGroup, "billing", HeaderTopic, "orders", HeaderRetries, "1"), "", string(value)},
		{fuzzcheck.Pairs("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", HeaderGroup, "\xff\xfe"), "\xff", string(value)},
		{nil, "", ""},
		{nil, "", "null"},
		{nil, "", `{"n":1e999}`},
		{nil, "", `{"n":` + long + `}`},
		{fuzzcheck.Pairs(letter...)[:len(fuzzcheck.Pairs(letter...))-3], "", string(value)},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "", string(value)},
		{fuzzcheck.Pairs(HeaderShard, "-1"), "", string(value)},
		{fuzzcheck.Pairs(HeaderRetries, "+7", HeaderShard, "007"), "", string(value)},
		{fuzzcheck.Pairs(HeaderRetries, "9223372036854775808"), "", string(value)},
		{fuzzcheck.Pairs(HeaderShard, "4096"), "", string(value)},
		{fuzzcheck.Pairs(HeaderRetries, "1000001"), "", string(value)},
		{fuzzcheck.Pairs(HeaderDeathRetries, "1000000", HeaderDeathReason, ""), "", string(value)},
		{fuzzcheck.Pairs(HeaderRetries, "1", HeaderRetries, "2", HeaderGroup, "a", HeaderGroup, "b"), "", string(value)},
		{fuzzcheck.Pairs(HeaderFirstFailure, "2026-13-40T99:99:99Z"), "", string(value)},
		{fuzzcheck.Pairs(HeaderLastFailure, "10000-01-01T00:00:00Z"), "", string(value)},
		{fuzzcheck.Pairs(HeaderDue, long), "", string(value)},
		{fuzzcheck.Pairs(HeaderRetries, long), "", string(value)},
		{fuzzcheck.Pairs(HeaderDeathFirstFailure, "\x1b[31m\n"), "", string(value)},
		{fuzzcheck.Pairs(HeaderFirstFailure, "0000-01-01T00:00:00+01:00"), "", string(value)},
		{fuzzcheck.Pairs(HeaderDeathLastFailure, "9999-12-31T23:59:59-01:00", HeaderDeathReason, "rejected"), "", string(value)},
		{fuzzcheck.Pairs(HeaderDue, "2026-01-02T03:04:05+24:00"), "", string(value)},
		{fuzzcheck.Pairs(HeaderResume, "true"), "", string(value)},
		{fuzzcheck.Pairs(HeaderResume, "0", HeaderResume, "1"), "", string(value)},
		{fuzzcheck.Pairs(HeaderDeathReason, "rejected", HeaderDeathError, strings.Repeat("é", topology.MaxDeathErrorBytes)), "", string(value)},
	} {
		f.Add(seed.hdrs, []byte(seed.key), []byte(seed.value))
	}
	b := fuzzBackend()
	f.Fuzz(func(t *testing.T, hdrs, key, value []byte) {
		rec := &sarama.ConsumerMessage{Topic: "t", Key: key, Value: value, Headers: splitHeaders(hdrs)}
		var (
			l   topology.Letter[topologytest.Msg]
			m   meta
			err error
		)
		fuzzcheck.Bounded(t, "decodeLetter", len(hdrs)+len(key)+len(value), func() { l, m, err = decodeLetter(b, rec) })
		fuzzcheck.SafeError(t, "decodeLetter", err)
		bad := malformed(rec.Headers)
		want, codecErr := b.opts.Codec.Decode(value)
		if !topologytest.DecodeVerdict(t, bad, err, codecErr, l) {
			return
		}
		if l.Value != want || l.Key != string(key) {
			t.Fatalf("decoded value %+v, key %q; want %+v, %q", l.Value, l.Key, want, key)
		}
		// What the encoder writes for l and m reads back the same.
		hs := letterHeaders(&l, nil)
		if m.group != "" {
			hs = append(hs, header(HeaderGroup, m.group))
		}
		if m.topic != "" {
			hs = append(hs, header(HeaderTopic, m.topic))
		}
		if !m.due.IsZero() {
			hs = append(hs, timeHeader(HeaderDue, m.due))
		}
		got, gm, err := decodeLetter(b, record(l.Key, value, hs))
		if err != nil {
			t.Fatalf("the encoding of %+v does not decode: %v", l, err)
		}
		if d := topologytest.LetterDiff(l, got); d != "" || gm.group != m.group || gm.topic != m.topic || !gm.due.Equal(m.due) {
			t.Fatalf("round trip: %s; meta %+v, want %+v", d, gm, m)
		}
	})
}

// Guarantee: every letter a source can hand to the backend, whatever its
// key, history and death, is written as headers that read back as the
// same letter: nothing the encoder writes is a record the decoder skips.
func FuzzLetterHeadersRoundTrip(f *testing.F) {
	f.Add("A", 3, 2, int64(1767323045000000006), int64(1767323046000000000), true, true, "max_retries", "boom", "orders", "billing", 10)
	f.Add("", 0, 0, int64(0), int64(0), false, false, "", "", "", "", 0)
	f.Add("\xff\x00", topology.MaxRoutingShards-1, topology.MaxRetriesLimit, int64(-1), int64(math.MaxInt64), false, true, "\xff", "\n", "", "\x00", topology.MaxRetriesLimit)
	f.Add("A", 1, 1, int64(1), int64(2), false, true, "rejected", strings.Repeat("é", topology.MaxDeathErrorBytes), "orders", "billing", 1)
	b := fuzzBackend()
	f.Fuzz(func(t *testing.T, key string, shard, retries int, first, last int64, resume, dead bool, reason, errText, dtopic, dgroup string, dretries int) {
		// The values a source gives a letter: a shard below the routing
		// shards, retries up to MaxRetries, failure times from the clock.
		shard, retries, dretries = topologytest.Bound(shard, topology.MaxRoutingShards-1), topologytest.Bound(retries, topology.MaxRetriesLimit), topologytest.Bound(dretries, topology.MaxRetriesLimit)
		l := topology.Letter[topologytest.Msg]{Value: topologytest.Msg{Key: key, N: retries}, Key: key, Shard: shard,
			Retries: retries, FirstFailure: topologytest.Clock(first), LastFailure: topologytest.Clock(last), Resume: resume}
		if dead {
			l.Death = &topology.Death{Reason: topology.Reason(reason), Error: errText, Topic: dtopic, Group: dgroup,
				Retries: dretries, FirstFailure: topologytest.Clock(first), LastFailure: topologytest.Clock(last)}
		}
		value, err := b.opts.Codec.Encode(l.Value)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := decodeLetter(b, record(l.Key, value, letterHeaders(&l, nil)))
		if err != nil {
			t.Fatalf("the encoding of %+v does not decode: %v", l, err)
		}
		if got.Value.Key != l.Value.Key { // JSON carries invalid UTF-8 as U+FFFD
			l.Value.Key = got.Value.Key
		}
		if l.Death != nil {
			// A longer failure text is carried cut (see topology.MaxDeathErrorBytes).
			l.Death.Error = topology.BoundDeathError(errText)
		}
		if d := topologytest.LetterDiff(l, got); d != "" {
			t.Fatalf("round trip of %+v: %s", l, d)
		}
	})
}
