package pulsartopology

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/fuzzcheck"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/topology"
	"github.com/boulevard-go/boulevard/topic/topology/topologytest"
)

// splitProps reads b (fuzzcheck.Pairs) into the map pulsar-client-go hands
// a message's properties over as (the last of a repeated key counts).
func splitProps(b []byte) map[string]string {
	var p map[string]string
	fuzzcheck.Split(b, func(k, v []byte) {
		if p == nil {
			p = make(map[string]string)
		}
		p[string(k)] = string(v)
	})
	return p
}

// malformed returns why properties p do not hold a letter's history (""
// when they do): a count that is not a decimal from 0 to its bound, a time
// that is not RFC 3339 of the years 0 to 9999 UTC (what properties
// writes), a resume that is neither "true" nor "false"; the death's own
// properties as well on a message without a death reason.
func malformed(p map[string]string) string {
	counts := map[string]int{PropShard: topology.MaxRoutingShards - 1, PropRetries: topology.MaxRetriesLimit, PropDeathRetries: topology.MaxRetriesLimit}
	times := []string{PropFirstFailure, PropLastFailure, PropDeathFirstFailure, PropDeathLastFailure}
	for k, v := range p {
		if limit, ok := counts[k]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || n > int64(limit) {
				return "property " + k + "=" + strconv.Quote(v)
			}
		}
		if slices.Contains(times, k) {
			if t, err := time.Parse(time.RFC3339Nano, v); err != nil || t.UTC().Year() < 0 || t.UTC().Year() > 9999 {
				return k + "=" + strconv.Quote(v)
			}
		}
		if k == PropResume && v != "true" && v != "false" {
			return k + "=" + strconv.Quote(v)
		}
	}
	return ""
}

// Guarantee: for any properties and payload another producer
// (pulsar-client, another client library) may write, decodeLetter never
// panics, allocates in proportion to the message only, and either decodes
// a letter or returns an error of bounded length that is safe to log; it
// returns an error exactly when a history property is malformed (a count
// that is not a decimal within its bound, a time that is not RFC 3339 or
// that the encoder cannot write back, a resume that is neither "true" nor
// "false") or the payload does not
// decode, never a wrong value. A letter it decodes reads back the same
// once encoded again.
func FuzzDecodeLetter(f *testing.F) {
	codec := topic.JSONCodec[topologytest.Msg]{}
	var letter []string
	for k, v := range properties(&topology.Letter[topologytest.Msg]{Shard: 3, Retries: 2,
		FirstFailure: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), LastFailure: time.Date(2026, 1, 2, 3, 4, 6, 0, time.FixedZone("", 3600)),
		Resume: true, Death: &topology.Death{Reason: topology.ReasonMaxRetries, Error: "boom\nline two", Topic: "orders",
			Group: "billing", Retries: 10, FirstFailure: time.Unix(1, 0), LastFailure: time.Unix(2, 5)}}, "billing") {
		letter = append(letter, k, v)
	}
	value := `{"key":"A","n":1}`
	long := strings.Repeat("9", 2<<10) // longer than fuzzcheck.MaxErrorText
	for _, seed := range []struct{ props, payload string }{
		{string(fuzzcheck.Pairs(letter...)), value},
		{string(fuzzcheck.Pairs(PropGroup, "billing", PropRetries, "1", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")), value},
		{string(fuzzcheck.Pairs(PropGroup, "\xff\xfe", PropDeathReason, "\x00")), value},
		{"", ""},
		{"", "null"},
		{"", `{"n":` + long + `}`},
		{string(fuzzcheck.Pairs(letter...)[:len(fuzzcheck.Pairs(letter...))-3]), value},
		{"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", value},
		{string(fuzzcheck.Pairs(PropShard, "-1")), value},
		{string(fuzzcheck.Pairs(PropRetries, "+7", PropShard, "007")), value},
		{string(fuzzcheck.Pairs(PropRetries, "9223372036854775808")), value},
		{string(fuzzcheck.Pairs(PropShard, "4096")), value},
		{string(fuzzcheck.Pairs(PropRetries, "1000001")), value},
		{string(fuzzcheck.Pairs(PropDeathRetries, "-1")), value},
		{string(fuzzcheck.Pairs(PropDeathRetries, "-1", PropDeathReason, "")), value},
		{string(fuzzcheck.Pairs(PropRetries, "1", PropRetries, "2")), value},
		{string(fuzzcheck.Pairs(PropFirstFailure, "2026-13-40T99:99:99Z")), value},
		{string(fuzzcheck.Pairs(PropLastFailure, "10000-01-01T00:00:00Z")), value},
		{string(fuzzcheck.Pairs(PropLastFailure, long)), value},
		{string(fuzzcheck.Pairs(PropRetries, long)), value},
		{string(fuzzcheck.Pairs(PropResume, "1")), value},
		{string(fuzzcheck.Pairs(PropResume, "false")), value},
		{string(fuzzcheck.Pairs(PropFirstFailure, "\x1b[31m\n")), value},
		{string(fuzzcheck.Pairs(PropFirstFailure, "0000-01-01T00:00:00+01:00")), value},
		{string(fuzzcheck.Pairs(PropDeathLastFailure, "9999-12-31T23:59:59-01:00", PropDeathReason, "rejected")), value},
		{string(fuzzcheck.Pairs(PropDeathReason, "rejected", PropDeathError, strings.Repeat("é", topology.MaxDeathErrorBytes))), value},
	} {
		f.Add([]byte(seed.props), []byte(seed.payload))
	}
	f.Fuzz(func(t *testing.T, props, payload []byte) {
		p := splitProps(props)
		var (
			l     topology.Letter[topologytest.Msg]
			group string
			err   error
		)
		fuzzcheck.Bounded(t, "decodeLetter", len(props)+len(payload), func() { l, group, err = decodeLetter(codec, p, payload) })
		fuzzcheck.SafeError(t, "decodeLetter", err)
		bad := malformed(p)
		want, codecErr := codec.Decode(payload)
		if !topologytest.DecodeVerdict(t, bad, err, codecErr, l) {
			return
		}
		if l.Value != want || group != p[PropGroup] {
			t.Fatalf("decoded value %+v, group %q; want %+v, %q", l.Value, group, want, p[PropGroup])
		}
		// What the encoder writes for l and its group reads back the same.
		got, g, err := decodeLetter(codec, properties(&l, group), payload)
		if err != nil {
			t.Fatalf("the encoding of %+v does not decode: %v", l, err)
		}
		if l.Death != nil {
			// A longer failure text is carried cut (see topology.MaxDeathErrorBytes).
			l.Death.Error = topology.BoundDeathError(l.Death.Error)
		}
		if d := topologytest.LetterDiff(l, got); d != "" || g != group {
			t.Fatalf("round trip: %s; group %q, want %q", d, g, group)
		}
	})
}

// Guarantee: every letter a source can hand to the backend, whatever its
// history, death and group, is written as properties that read back as
// the same letter and group: nothing the encoder writes is a message the
// decoder skips.
func FuzzPropertiesRoundTrip(f *testing.F) {
	f.Add(3, 2, int64(1767323045000000006), int64(1767323046000000000), true, "billing", true, "max_retries", "boom", "orders", "billing", 10)
	f.Add(0, 0, int64(0), int64(0), false, "", false, "", "", "", "", 0)
	f.Add(topology.MaxRoutingShards-1, topology.MaxRetriesLimit, int64(-1), int64(math.MaxInt64), false, "\xff", true, "\xff", "\n", "", "\x00", topology.MaxRetriesLimit)
	f.Add(1, 1, int64(1), int64(2), false, "billing", true, "rejected", strings.Repeat("é", topology.MaxDeathErrorBytes), "orders", "billing", 1)
	codec := topic.JSONCodec[topologytest.Msg]{}
	f.Fuzz(func(t *testing.T, shard, retries int, first, last int64, resume bool, group string, dead bool, reason, errText, dtopic, dgroup string, dretries int) {
		// The values a source gives a letter: a shard below the routing
		// shards, retries up to MaxRetries, failure times from the clock.
		shard, retries, dretries = topologytest.Bound(shard, topology.MaxRoutingShards-1), topologytest.Bound(retries, topology.MaxRetriesLimit), topologytest.Bound(dretries, topology.MaxRetriesLimit)
		l := topology.Letter[topologytest.Msg]{Value: topologytest.Msg{N: retries}, Shard: shard,
			Retries: retries, FirstFailure: topologytest.Clock(first), LastFailure: topologytest.Clock(last), Resume: resume}
		if dead {
			l.Death = &topology.Death{Reason: topology.Reason(reason), Error: errText, Topic: dtopic, Group: dgroup,
				Retries: dretries, FirstFailure: topologytest.Clock(first), LastFailure: topologytest.Clock(last)}
		}
		payload, err := codec.Encode(l.Value)
		if err != nil {
			t.Fatal(err)
		}
		got, g, err := decodeLetter(codec, properties(&l, group), payload)
		if err != nil {
			t.Fatalf("the encoding of %+v does not decode: %v", l, err)
		}
		if l.Death != nil {
			// A longer failure text is carried cut (see topology.MaxDeathErrorBytes).
			l.Death.Error = topology.BoundDeathError(errText)
		}
		if d := topologytest.LetterDiff(l, got); d != "" || g != group {
			t.Fatalf("round trip of %+v: %s; group %q, want %q", l, d, g, group)
		}
	})
}

// Guarantee: a marker another reader stamped is passed on only while it
// is within markerLife of now, in either direction; any other text, or a
// stamp further away (a year ahead, the largest number), is dropped, so no
// marker goes back to the subscription forever.
func FuzzMarkerYoung(f *testing.F) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, at := range []string{
		strconv.FormatInt(now.UnixMilli(), 10),
		strconv.FormatInt(now.Add(-markerLife+time.Millisecond).UnixMilli(), 10),
		strconv.FormatInt(now.Add(-markerLife).UnixMilli(), 10),
		strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10),
		strconv.FormatInt(now.AddDate(1, 0, 0).UnixMilli(), 10),
		"9223372036854775807", "-9223372036854775808", "", "x", "+1767323045000", "1767323045000.5",
	} {
		f.Add(at)
	}
	f.Fuzz(func(t *testing.T, at string) {
		young := markerYoung(at, now)
		ms, err := strconv.ParseInt(at, 10, 64)
		if err != nil {
			if young {
				t.Fatalf("marker stamped %q is young", at)
			}
			return
		}
		// Within markerLife of now in milliseconds, computed without
		// overflow.
		lo, hi := now.Add(-markerLife).UnixMilli(), now.Add(markerLife).UnixMilli()
		if want := ms > lo && ms < hi; young != want {
			t.Fatalf("marker stamped %d (now %d): young %t, want %t", ms, now.UnixMilli(), young, want)
		}
	})
}
