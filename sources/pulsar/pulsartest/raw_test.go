package pulsartest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/logtest"
)

// rawConn is a minimal hand-driven protocol client for behaviour that
// pulsar-client-go never exercises (bad checksums, unknown commands, ...).
type rawConn struct {
	t  testing.TB
	nc net.Conn
}

func dialRaw(t testing.TB, b *Broker) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// connectedRaw dials b and sends CONNECT (protocol version 20).
func connectedRaw(t testing.TB, b *Broker) *rawConn {
	t.Helper()
	r := dialRaw(t, b)
	r.connect(20)
	return r
}

func (r *rawConn) send(typ int, body func([]byte) []byte, payload []byte) {
	r.t.Helper()
	o, fs, bs := beginFrame(nil, typ)
	if body != nil {
		o = body(o)
	}
	o = endFrame(o, typ, fs, bs, payload)
	if _, err := r.nc.Write(o); err != nil {
		r.t.Fatal(err)
	}
}

// rawReadWait bounds the wait for each command read on a rawConn: the
// tests of bounded work wait for the broker's answer this long, which a
// broker whose work is bounded meets with room to spare on a busy machine
// under -race, and one busy for minutes does not.
const rawReadWait = 30 * time.Second

// read returns the next command's type, body fields and payload.
func (r *rawConn) read() (int, flat, []byte) {
	r.t.Helper()
	_ = r.nc.SetReadDeadline(time.Now().Add(rawReadWait))
	var hdr [8]byte
	if _, err := io.ReadFull(r.nc, hdr[:]); err != nil {
		r.t.Fatalf("read: %v", err)
	}
	total, size := binary.BigEndian.Uint32(hdr[:4]), binary.BigEndian.Uint32(hdr[4:])
	frame := make([]byte, total-4)
	if _, err := io.ReadFull(r.nc, frame); err != nil {
		r.t.Fatalf("read: %v", err)
	}
	cmd, err := decodeBase(frame[:size])
	if err != nil {
		r.t.Fatal(err)
	}
	f, err := decodeFlat(cmd.body)
	if err != nil {
		r.t.Fatal(err)
	}
	return cmd.typ, f, frame[size:]
}

func (r *rawConn) expect(typ int) (flat, []byte) {
	r.t.Helper()
	got, f, p := r.read()
	if got != typ {
		r.t.Fatalf("got %s %v, want %s", cmdName(got), f, cmdName(typ))
	}
	return f, p
}

func (r *rawConn) connect(version int) flat {
	r.t.Helper()
	r.send(cmdConnect, func(o []byte) []byte {
		o = appendStringField(o, 1, "raw-test")
		return appendVarintField(o, 4, uint64(version))
	}, nil)
	f, _ := r.expect(cmdConnected)
	return f
}

// CONNECTED carries the lower of the client's and the broker's protocol
// versions and the maximum message size.
func TestRawVersionNegotiation(t *testing.T) {
	b := startBroker(t)
	if f := dialRaw(t, b).connect(99); f.u[2] != maxProtocolVersion || f.u[3] != maxMessageSize || f.str(1) != "pulsartest" {
		t.Fatalf("connected %+v", f)
	}
	if f := dialRaw(t, b).connect(13); f.u[2] != 13 {
		t.Fatalf("connected %+v", f)
	}
}

// A command sent before CONNECT closes the connection.
func TestRawCommandBeforeConnectCloses(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.send(cmdPing, nil, nil)
	_ = r.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("connection still open")
	}
}

// PING is answered with PONG and counted.
func TestRawPingPong(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(20)
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong)
	if st := b.Stats(); st.Pings != 1 || st.ConnectionsOpen != 1 || st.ConnectionsAccepted != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// An unsupported command with a request id fails with an ERROR that names
// the command, and the connection stays usable.
func TestRawUnsupportedCommand(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(20)
	r.send(cmdGetSchema, func(o []byte) []byte {
		o = appendVarintField(o, 1, 7)
		return appendStringField(o, 2, "persistent://public/default/x")
	}, nil)
	f, _ := r.expect(cmdError)
	if f.u[1] != 7 || ServerErrorCode(f.u[2]) != NotAllowedError || !strings.Contains(f.str(3), "GET_SCHEMA") {
		t.Fatalf("error %+v", f)
	}
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong)
	if b.Stats().UnsupportedCommands != 1 {
		t.Fatalf("stats %+v", b.Stats())
	}
}

func rawProducer(r *rawConn, topic string) {
	r.send(cmdProducer, func(o []byte) []byte {
		o = appendStringField(o, 1, topic)
		o = appendVarintField(o, 2, 1)
		return appendVarintField(o, 3, 1)
	}, nil)
	r.expect(cmdProducerSuccess)
}

func rawSend(r *rawConn, seq uint64, section []byte) {
	r.send(cmdSend, func(o []byte) []byte {
		o = appendVarintField(o, 1, 1)
		return appendVarintField(o, 2, seq)
	}, section)
}

// A payload whose CRC32-C does not match is refused with a SEND_ERROR
// (ChecksumError) and not stored; a correct one gets a receipt.
func TestRawChecksumVerified(t *testing.T) {
	b := startBroker(t)
	r := dialRaw(t, b)
	r.connect(20)
	rawProducer(r, "crc")
	good := encodeSingle(Message{Payload: []byte("hello")}, 0, time.Now())
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] ^= 0xff
	rawSend(r, 0, bad)
	f, _ := r.expect(cmdSendError)
	if ServerErrorCode(f.u[3]) != ChecksumError || f.u[2] != 0 {
		t.Fatalf("send error %+v", f)
	}
	rawSend(r, 1, good)
	f, _ = r.expect(cmdSendReceipt)
	id, err := decodeMsgID(f.bs[3])
	if err != nil || f.u[2] != 1 || id.entry != 0 {
		t.Fatalf("receipt %+v %+v %v", f, id, err)
	}
	if ms := b.Messages("crc"); len(ms) != 1 || string(ms[0].Payload) != "hello" {
		t.Fatalf("stored %+v", ms)
	}
}

func rawSubscribe(r *rawConn, topic, sub string, typ int, consumerID, reqID uint64) {
	r.t.Helper()
	r.send(cmdSubscribe, func(o []byte) []byte {
		o = appendStringField(o, 1, topic)
		o = appendStringField(o, 2, sub)
		o = appendVarintField(o, 3, uint64(typ))
		o = appendVarintField(o, 4, consumerID)
		o = appendVarintField(o, 5, reqID)
		return appendVarintField(o, 13, 1) // earliest
	}, nil)
	if f, _ := r.expect(cmdSuccess); f.u[1] != reqID {
		r.t.Fatalf("success %+v", f)
	}
}

func rawUnsubscribe(r *rawConn, consumerID, reqID uint64) {
	r.send(cmdUnsubscribe, func(o []byte) []byte {
		o = appendVarintField(o, 1, consumerID)
		return appendVarintField(o, 2, reqID)
	}, nil)
}

// Unsubscribe is refused while other consumers are attached; from the last
// consumer it deletes the subscription and its backlog. (pulsar-client-go
// (v0.21.0) leaks a consumer's goroutines after a successful Unsubscribe —
// internalUnsubscribe marks it closed, so Close returns early — hence this
// test drives the protocol by hand.)
func TestRawUnsubscribe(t *testing.T) {
	b := startBroker(t)
	if _, err := b.Publish(ctxT(t), "unsub", Message{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, "unsub", "s", subShared, 1, 1)
	rawSubscribe(r, "unsub", "s", subShared, 2, 2)
	rawUnsubscribe(r, 1, 3)
	if f, _ := r.expect(cmdError); f.u[1] != 3 || ServerErrorCode(f.u[2]) != NotAllowedError {
		t.Fatalf("error %+v", f)
	}
	if got := b.Backlog("unsub", "s"); got != 1 {
		t.Fatalf("backlog %d", got)
	}
	r.send(cmdCloseConsumer, func(o []byte) []byte {
		o = appendVarintField(o, 1, 2)
		return appendVarintField(o, 2, 4)
	}, nil)
	r.expect(cmdSuccess)
	rawUnsubscribe(r, 1, 5)
	if f, _ := r.expect(cmdSuccess); f.u[1] != 5 {
		t.Fatalf("success %+v", f)
	}
	if got := b.Backlog("unsub", "s"); got != -1 {
		t.Fatalf("subscription still there, backlog %d", got)
	}
	if st := b.Consumers("unsub", "s"); st != nil {
		t.Fatalf("consumers of a deleted subscription: %+v", st)
	}
}

// REDELIVER_UNACKNOWLEDGED_MESSAGES without ids redelivers everything the
// consumer holds unacked, with the redelivery count raised on a Shared
// subscription (on Exclusive and Failover counts stay 0, see
// TestSingleActiveRedeliveryRewinds); payload bytes are pushed exactly as
// stored.
func TestRawRedeliverAll(t *testing.T) {
	b := startBroker(t)
	if _, err := b.Publish(ctxT(t), "rd", Message{Payload: []byte("a")}, Message{Payload: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, b)
	r.connect(20)
	rawSubscribe(r, "rd", "s", subShared, 3, 9)
	r.send(cmdFlow, func(o []byte) []byte {
		o = appendVarintField(o, 1, 3)
		return appendVarintField(o, 2, 10)
	}, nil)
	stored := b.Messages("rd")
	for i := range 2 {
		f, p := r.expect(cmdMessage)
		if f.u[1] != 3 || f.u[3] != 0 {
			t.Fatalf("message %+v", f)
		}
		_, payload, err := splitPayloadSection(p)
		if err != nil || string(payload) != string(stored[i].Payload) {
			t.Fatalf("payload %q %v", payload, err)
		}
	}
	r.send(cmdRedeliver, func(o []byte) []byte { return appendVarintField(o, 1, 3) }, nil)
	for range 2 {
		if f, _ := r.expect(cmdMessage); f.u[3] != 1 {
			t.Fatalf("redelivery count %+v", f)
		}
	}
	st := b.Consumers("rd", "s")[0]
	if st.Nacked != 2 || st.Redelivered != 2 || st.Dispatched != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// refuseSend has b refuse a SEND (its checksum does not match) and
// returns once the client got the refusal: the broker has logged it.
func refuseSend(t *testing.T, b *Broker) {
	t.Helper()
	r := dialRaw(t, b)
	r.connect(20)
	rawProducer(r, "crc")
	bad := encodeSingle(Message{Payload: []byte("hello")}, 0, time.Now())
	bad[len(bad)-1] ^= 0xff
	rawSend(r, 0, bad)
	r.expect(cmdSendError)
}

// The broker logs why it refused a SEND under the attribute every package
// of the project names its error with, "error", so that one query finds
// the broker's failures with the pipelines'.
func TestARefusedSendIsLoggedWithItsErrorUnderTheErrorKey(t *testing.T) {
	var lines logtest.Lines
	b := startBrokerWith(t, Options{Logger: slog.New(slog.NewTextHandler(&lines, nil))})
	refuseSend(t, b)
	lines.Want(t, 1, "refused SEND with its error under error=", `msg="pulsartest: rejected SEND"`, " error=")
}

// A broker started without a Logger logs to slog.Default(), never nowhere.
func TestABrokerWithoutALoggerLogsToTheDefaultLogger(t *testing.T) {
	lines := logtest.CaptureDefault(t)
	b, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	refuseSend(t, b)
	lines.Want(t, 1, "refused SEND on slog.Default()", `msg="pulsartest: rejected SEND"`)
}

// failingListener is a net.Listener whose Accept fails with err.
type failingListener struct {
	net.Listener
	err error
}

func (l failingListener) Accept() (net.Conn, error) { return nil, l.err }

// An accept failure that is no timeout ends the broker's accept loop: no
// client connects any more, which a test cannot get past without a
// person, so the broker says so at ERROR.
func TestAnAcceptFailureThatStopsTheBrokerAcceptingIsAnError(t *testing.T) {
	var lines logtest.Lines
	b := &Broker{log: slog.New(slog.NewTextHandler(&lines, nil)), done: make(chan struct{}),
		ln: failingListener{err: errors.New("too many open files")}}
	b.wg.Add(1)
	b.acceptLoop() // returns: the failure ends it
	lines.Want(t, 1, "ERROR lines saying the broker accepts no more connections",
		"level=ERROR", `msg="pulsartest: accepting a connection failed; the broker accepts no more connections"`, `error="too many open files"`)
}
