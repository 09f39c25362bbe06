package pulsartest

import (
	"testing"
	"time"
)

// The decoders never panic on arbitrary bytes: a malformed frame is an
// error, so a broken client cannot crash the test process.
func FuzzDecoders(f *testing.F) {
	o, fs, bs := beginFrame(nil, cmdSubscribe)
	o = appendStringField(o, 1, "t")
	o = appendVarintField(o, 4, 1)
	o = endFrame(o, cmdSubscribe, fs, bs, nil)
	f.Add(o[8:])
	f.Add(encodeSingle(Message{Key: "k", Payload: []byte("p"), Properties: map[string]string{"a": "b"}}, 1, time.Now()))
	f.Add(encodeBatch([]Message{{Payload: []byte("a")}, {Payload: []byte("b")}}, 1, time.Now()))
	f.Add([]byte{0x1f, 0x61, 0x62, 0x63, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		if cmd, err := decodeBase(b); err == nil {
			_, _ = decodeSubscribe(cmd.body)
			_, _ = decodeFlat(cmd.body)
		}
		if id, err := decodeMsgID(b); err == nil {
			n := 0
			id.ackSet.each(func(int, uint64) bool { n++; return true })
			if n != id.ackSet.words {
				t.Fatalf("ack_set has %d words, each read %d", id.ackSet.words, n)
			}
		}
		_, _ = decodeMetadata(b, true)
		_, _ = decodeSingleMeta(b)
		_, _ = lz4Block(b, 64)
		if meta, payload, err := splitPayloadSection(b); err == nil {
			_, _ = decodeMetadata(meta, true)
			_ = appendDecoded(nil, &entry{data: b}, MessageID{})
			_ = payload
		}
	})
}

// LZ4 blocks decode to exactly the announced size; truncated or
// inconsistent blocks are errors.
func TestLZ4Block(t *testing.T) {
	// Literal "abc", then a match of length 6 at offset 3: "abcabcabc".
	good := []byte{0x32, 'a', 'b', 'c', 0x03, 0x00}
	got, err := lz4Block(append(good, 0x00), 9)
	if err != nil || string(got) != "abcabcabc" {
		t.Fatalf("decoded %q, %v", got, err)
	}
	for _, bad := range [][]byte{good[:3], {0x10}, {0x0f, 0x00, 0x00}} {
		if _, err := lz4Block(bad, 9); err == nil {
			t.Errorf("lz4Block(%v) succeeded", bad)
		}
	}
}
