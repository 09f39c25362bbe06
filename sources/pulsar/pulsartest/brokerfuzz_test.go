package pulsartest

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"
)

// hostileCloseWait bounds the wait for the broker to end a connection
// whose client stopped writing: it must have read everything and closed
// well before.
const hostileCloseWait = 10 * time.Second

// Guarantee: whatever a connected client sends (any command type with any
// body and payload, followed by any bytes), the broker never panics: it
// answers, or closes the connection, and it ends the connection once the
// client stops writing; a new client still connects and gets its PONG.
func FuzzBrokerSurvivesAnyFrame(f *testing.F) {
	b, err := Start(context.Background(), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatalf("Start: %v", err)
	}
	f.Cleanup(func() {
		if err := b.Close(); err != nil {
			f.Errorf("Close: %v", err)
		}
	})
	sub := appendStringField(nil, 1, "persistent://public/default/t")
	sub = appendStringField(sub, 2, "s")
	sub = appendVarintField(sub, 3, 1)
	sub = appendVarintField(sub, 4, 1)
	sub = appendVarintField(sub, 5, 2)
	prod := appendStringField(nil, 1, "persistent://public/default/t")
	prod = appendVarintField(prod, 2, 1)
	prod = appendVarintField(prod, 3, 1)
	send := appendVarintField(nil, 1, 1)
	send = appendVarintField(send, 2, 1)
	single := encodeSingle(Message{Key: "k", Payload: []byte("p"), Properties: map[string]string{"a": "b"}}, 1, time.Now())
	batch := encodeBatch([]Message{{Payload: []byte("a")}, {Payload: []byte("b")}}, 1, time.Now())
	f.Add(uint8(cmdSubscribe), sub, []byte(nil), []byte(nil))
	f.Add(uint8(cmdProducer), prod, []byte(nil), []byte(nil))
	f.Add(uint8(cmdSend), send, single, []byte(nil))
	f.Add(uint8(cmdSend), send, batch, []byte(nil))
	f.Add(uint8(cmdFlow), appendVarintField(appendVarintField(nil, 1, 1), 2, 1000), []byte(nil), []byte(nil))
	f.Add(uint8(cmdAck), appendVarintField(nil, 1, 1), []byte(nil), []byte{0, 0, 0, 0})
	f.Add(uint8(cmdPing), []byte(nil), []byte(nil), []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	f.Add(uint8(cmdConnect), []byte{0x0a, 0xff}, []byte{0x0e, 0x01}, []byte(nil))
	f.Add(uint8(200), []byte{0x08}, []byte(nil), []byte{0, 0, 0, 5, 0, 0, 0, 9, 1})
	f.Fuzz(func(t *testing.T, typ uint8, body, payload, tail []byte) {
		r := connectedRaw(t, b)
		o, fs, bs := beginFrame(nil, int(typ))
		o = append(o, body...)
		o = endFrame(o, int(typ), fs, bs, payload)
		o = append(o, tail...)
		p, pfs, pbs := beginFrame(nil, cmdPing)
		o = append(o, endFrame(p, cmdPing, pfs, pbs, nil)...)
		_, _ = r.nc.Write(o) // the broker may close the connection first
		_ = r.nc.(*net.TCPConn).CloseWrite()
		_ = r.nc.SetReadDeadline(time.Now().Add(hostileCloseWait))
		if _, err := io.Copy(io.Discard, r.nc); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("command %d: connection still open %v after the client stopped writing", typ, hostileCloseWait)
		}
		next := connectedRaw(t, b)
		next.send(cmdPing, nil, nil)
		next.expect(cmdPong)
	})
}
