package pulsartest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"

	"github.com/boulevard-go/boulevard/internal/wait"
)

// These tests hold a raw connection that reads nothing (a client stuck,
// or gone without closing its socket) and check what it costs the broker
// and the other clients.

// stuckLimit is the Options.MaxOutgoingBytes of these tests: small, so
// that what the kernel's socket buffers take does not hide the broker's
// own queue.
const stuckLimit = 64 << 10

// stuckSlack is what a connection's queue may hold beyond its limit: one
// message of the tests' one-byte messages and one command's answers.
const stuckSlack = 4 << 10

// Guarantee: a client that grants permits for many messages and reads
// nothing costs the broker at most Options.MaxOutgoingBytes plus one
// message of queued data, however many messages its permits cover; the
// broker serves other connections meanwhile (a pulsar-client-go consumer
// of another topic receives what is published), and once the client reads
// again it gets every message its permits cover, in order.
func TestStuckClientQueueBounded(t *testing.T) {
	b := startBrokerWith(t, Options{MaxOutgoingBytes: stuckLimit, MaxUnackedPerConsumer: -1})
	const held = 200_000 // about 11 MiB of MESSAGE frames
	r, _ := rawHolding(t, b, FullTopicName("stuck"), subExclusive, held)
	wait.For(t, "the stuck connection's queue to reach its limit", func() bool { return b.Stats().QueuedBytes >= stuckLimit })

	ctx := ctxT(t)
	other := uniqueTopic(t)
	c, err := newClient(t, b).Subscribe(pulsar.ConsumerOptions{Topic: other, SubscriptionName: "o"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 50
	for i := range n {
		if _, err := b.Publish(ctx, other, Message{Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if m := receive(t, ctx, c); string(m.Payload()) != fmt.Sprint(i) {
			t.Fatalf("other consumer got %q, want %d", m.Payload(), i)
		}
	}
	st := b.Stats()
	t.Logf("queued now %d bytes, at most %d", st.QueuedBytes, st.MaxQueuedBytes)
	if st.MaxQueuedBytes > stuckLimit+stuckSlack {
		t.Fatalf("%d bytes queued for one connection, want at most %d", st.MaxQueuedBytes, stuckLimit+stuckSlack)
	}

	for i := range held {
		f, _ := r.expect(cmdMessage)
		if id, err := decodeMsgID(f.bs[2]); err != nil || id.entry != uint64(i) {
			t.Fatalf("message %d: entry %d (%v)", i, id.entry, err)
		}
	}
	if st := b.Consumers("stuck", "s")[0]; st.Dispatched != held {
		t.Fatalf("dispatched %d, want %d", st.Dispatched, held)
	}
}

// Guarantee: a client that sends commands and reads nothing is not read
// past a full queue: of a million PINGs, whose PONGs take about 11 MiB,
// the broker answers only as many as fit in Options.MaxOutgoingBytes
// (plus what the kernel's buffers take) until the client reads, and then
// answers every one.
func TestStuckClientCommandsWaitForRoom(t *testing.T) {
	b := startBrokerWith(t, Options{MaxOutgoingBytes: stuckLimit})
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	const pings = 1_000_000
	ping, fs, bs := beginFrame(nil, cmdPing)
	ping = endFrame(ping, cmdPing, fs, bs, nil)
	pong, fs, bs := beginFrame(nil, cmdPong)
	pong = endFrame(pong, cmdPong, fs, bs, nil)
	frames := make([]byte, 0, pings*len(ping))
	for range pings {
		frames = append(frames, ping...)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := r.nc.Write(frames)
		sent <- err
	}()
	// The broker either stops reading the connection (its queue is full)
	// or, not bounding it, answers every PING.
	wait.For(t, "the broker to stop reading or to answer every PING", func() bool {
		return b.Stats().Pings == pings || readerWaits(b)
	})
	st := b.Stats()
	t.Logf("%d PINGs read; queued now %d bytes, at most %d", st.Pings, st.QueuedBytes, st.MaxQueuedBytes)
	if st.MaxQueuedBytes > stuckLimit+stuckSlack {
		t.Fatalf("%d bytes queued for one connection, want at most %d", st.MaxQueuedBytes, stuckLimit+stuckSlack)
	}
	_ = r.nc.SetReadDeadline(time.Now().Add(time.Minute))
	if n, err := io.CopyN(io.Discard, r.nc, int64(pings*len(pong))); err != nil {
		t.Fatalf("read %d bytes of PONGs: %v", n, err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	r.send(cmdPing, nil, nil)
	r.expect(cmdPong)
}

// readerWaits reports whether a connection of b waits for room in its
// queue before it reads another command.
func readerWaits(b *Broker) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		if c.readWaits.Load() {
			return true
		}
	}
	return false
}

// Guarantee: a client that stops reading is disconnected once its socket
// has not taken what the broker queued within Options.WriteTimeout:
// the broker counts it in Stats().WriteTimeouts, its consumer is detached,
// and the messages it held go to the next consumer of the Shared
// subscription without a raised redelivery count.
func TestStuckClientClosedAfterWriteTimeout(t *testing.T) {
	b := startBrokerWith(t, Options{MaxOutgoingBytes: stuckLimit, WriteTimeout: 200 * time.Millisecond, MaxUnackedPerConsumer: -1})
	topic := FullTopicName("stuck-timeout")
	const held = 200_000
	rawHolding(t, b, topic, subShared, held)
	wait.For(t, "the stuck connection to be closed", func() bool {
		st := b.Stats()
		return st.WriteTimeouts == 1 && st.ConnectionsOpen == 0
	}, func() string { return fmt.Sprintf("stats %+v", b.Stats()) })
	if st := b.Consumers(topic, "s"); len(st) != 1 || st[0].Connected {
		t.Fatalf("consumers %+v, want the stuck one disconnected", st)
	}
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	rawSubscribe(r, topic, "s", subShared, 1, 1)
	rawFlow(r, 1, 1)
	f, _ := r.expect(cmdMessage)
	if id, err := decodeMsgID(f.bs[2]); err != nil || id.entry != 0 || f.u[3] != 0 {
		t.Fatalf("next consumer got entry %d (%v), redelivery count %d; want entry 0, count 0", id.entry, err, f.u[3])
	}
}

// The outgoing queue limit and the write timeout have documented defaults
// and are validated.
func TestOutgoingOptions(t *testing.T) {
	o := Options{}.WithDefaults()
	if o.MaxOutgoingBytes != DefaultMaxOutgoingBytes || o.WriteTimeout != DefaultWriteTimeout {
		t.Fatalf("defaults %d, %v", o.MaxOutgoingBytes, o.WriteTimeout)
	}
	for _, bad := range []Options{{MaxOutgoingBytes: 1 << 10}, {MaxOutgoingBytes: 1 << 30}, {WriteTimeout: time.Microsecond}} {
		if err := bad.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// Guarantee: no message stays behind while its consumer has permits,
// however often its connection's queue fills and drains: a client with
// an Exclusive, a Shared and a Key_Shared consumer (of three topics) on
// one connection, which stops reading until the queue is full and then
// reads while messages are still published to all three topics and PINGs
// are sent, gets every message, once and in order, and a PONG for every
// PING, round after round.
func TestDispatchResumesOnEveryConsumerOfAConnectionThatFillsAgain(t *testing.T) {
	b := startBrokerWith(t, Options{MaxOutgoingBytes: stuckLimit, MaxUnackedPerConsumer: -1})
	r := dialRaw(t, b)
	r.connect(maxProtocolVersion)
	// Small socket buffers on both sides: the kernel takes little of what
	// the broker queues, so its own queue is what fills.
	if err := r.nc.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	for c := range b.conns {
		if err := c.nc.(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
			b.mu.Unlock()
			t.Fatal(err)
		}
	}
	b.mu.Unlock()

	const rounds, perRound, pings = 20, 150, 2000
	topics := []string{FullTopicName("refill-excl"), FullTopicName("refill-shared"), FullTopicName("refill-keyshared")}
	for i, typ := range []int{subExclusive, subShared, subKeyShared} {
		id := uint64(i + 1)
		rawSubscribe(r, topics[i], "s", typ, id, id)
		rawFlow(r, id, rounds*perRound)
	}
	payload := make([]byte, 1<<10)
	ping, fs, bs := beginFrame(nil, cmdPing)
	ping = endFrame(ping, cmdPing, fs, bs, nil)
	next := make([]uint64, len(topics)) // the entry each consumer gets next
	for round := range rounds {
		errs := make(chan error, len(topics)+1)
		var wg sync.WaitGroup
		for _, topic := range topics {
			wg.Go(func() {
				for i := range perRound {
					msg := Message{Payload: payload, Key: fmt.Sprintf("k%d", i%7)}
					if _, err := b.Publish(context.Background(), topic, msg); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Go(func() {
			// The broker stops reading these once the queue is full; the
			// write returns once it reads again.
			_ = r.nc.SetWriteDeadline(time.Now().Add(time.Minute))
			if _, err := r.nc.Write(bytes.Repeat(ping, pings)); err != nil {
				errs <- err
			}
		})
		wait.For(t, fmt.Sprintf("round %d: the connection's queue to fill", round), func() bool {
			return b.Stats().QueuedBytes >= stuckLimit
		}, func() string { return fmt.Sprintf("stats %+v", b.Stats()) })
		msgs, pongs := 0, 0
		for msgs < len(topics)*perRound || pongs < pings {
			typ, f, _ := r.read()
			switch typ {
			case cmdPong:
				pongs++
			case cmdMessage:
				i := int(f.u[1]) - 1
				id, err := decodeMsgID(f.bs[2])
				if err != nil || i < 0 || i >= len(topics) || id.entry != next[i] {
					t.Fatalf("round %d: consumer %d got entry %d (%v), want %d", round, f.u[1], id.entry, err, next[i])
				}
				next[i]++
				msgs++
			default:
				t.Fatalf("round %d: unexpected %s", round, cmdName(typ))
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	for i, topic := range topics {
		if st := b.Consumers(topic, "s")[0]; st.Dispatched != rounds*perRound {
			t.Errorf("consumer %d: dispatched %d, want %d", i+1, st.Dispatched, rounds*perRound)
		}
	}
	if st := b.Stats(); st.MaxQueuedBytes > stuckLimit+stuckSlack {
		t.Errorf("%d bytes queued for the connection, want at most %d", st.MaxQueuedBytes, stuckLimit+stuckSlack)
	}
}
