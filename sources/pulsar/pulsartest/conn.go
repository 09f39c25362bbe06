package pulsartest

import (
	"bufio"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one client connection: a reader goroutine that decodes frames and
// runs the handlers, and a writer goroutine that flushes what handlers and
// dispatchers append to out. Handlers never block on the network.
//
// queued counts the bytes written to out and not yet accepted by the
// socket. At limit (Options.MaxOutgoingBytes) the connection is full:
// dispatchers pass its consumers over and the reader waits before it
// handles the next command. Whoever finds it full sets dispatchWaits or
// readWaits and then looks at queued again; the writer, once a flush
// brings queued under half the limit, clears the flags it finds set and
// dispatches again or wakes the reader (room). Either the second look
// sees the flush, or the writer sees the flag.
type conn struct {
	b  *Broker
	nc net.Conn
	id uint64

	mu     sync.Mutex // guards out, spare, closed
	out    []byte
	spare  []byte
	closed bool
	wake   chan struct{}
	done   chan struct{}
	once   sync.Once

	limit         int64
	queued        atomic.Int64
	dispatchWaits atomic.Bool
	readWaits     atomic.Bool
	room          chan struct{}

	// Guarded by Broker.mu.
	connected bool
	removed   bool
	producers map[uint64]*producer
	consumers map[uint64]*consumer
}

type producer struct {
	id    uint64
	name  string
	topic *topic
}

func newConn(b *Broker, nc net.Conn, id uint64) *conn {
	return &conn{
		b: b, nc: nc, id: id,
		limit:     int64(b.opts.MaxOutgoingBytes),
		room:      make(chan struct{}, 1),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		producers: map[uint64]*producer{},
		consumers: map[uint64]*consumer{},
	}
}

// close shuts the socket; the reader and writer then exit. Idempotent.
func (c *conn) close() {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		close(c.done)
		_ = c.nc.Close()
	})
}

// write appends one frame produced by enc to the output buffer and wakes
// the writer. It never blocks on the network.
func (c *conn) write(enc func([]byte) []byte) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	n := len(c.out)
	c.out = enc(c.out)
	q := c.queued.Add(int64(len(c.out) - n))
	c.mu.Unlock()
	for peak := c.b.maxQueued.Load(); q > peak && !c.b.maxQueued.CompareAndSwap(peak, q); {
		peak = c.b.maxQueued.Load()
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// hasRoom reports whether the connection's queue is under its limit; when
// it is not, it sets waits, so that the writer reports the room it makes.
func (c *conn) hasRoom(waits *atomic.Bool) bool {
	if c.queued.Load() < c.limit {
		return true
	}
	waits.Store(true)
	return c.queued.Load() < c.limit
}

// writable reports whether the connection's consumers may be sent messages
// now (see conn).
func (c *conn) writable() bool { return c.hasRoom(&c.dispatchWaits) }

// awaitRoom waits until the connection's queue is under its limit before
// the reader handles another command. It returns false when the
// connection closed first.
func (c *conn) awaitRoom() bool {
	for !c.hasRoom(&c.readWaits) {
		select {
		case <-c.room:
		case <-c.done:
			return false
		}
	}
	return true
}

// flushed takes n bytes the socket accepted off the queue and, once it is
// under half the limit, resumes what waited for room.
func (c *conn) flushed(n int) {
	if c.queued.Add(-int64(n)) >= c.limit/2 {
		return
	}
	if c.readWaits.CompareAndSwap(true, false) {
		select {
		case c.room <- struct{}{}:
		default:
		}
	}
	if c.dispatchWaits.CompareAndSwap(true, false) {
		c.b.mu.Lock()
		defer c.b.mu.Unlock()
		if c.removed {
			return
		}
		var subs []*subscription
		for _, cons := range c.consumers {
			if !slices.Contains(subs, cons.sub) {
				subs = append(subs, cons.sub)
			}
		}
		for _, s := range subs {
			s.dispatch()
		}
	}
}

func (c *conn) writeLoop() {
	defer c.b.wg.Done()
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		c.mu.Lock()
		buf := c.out
		c.out = c.spare[:0]
		c.mu.Unlock()
		if len(buf) > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(c.b.opts.WriteTimeout))
			if _, err := c.nc.Write(buf); err != nil {
				c.logWriteErr(err)
				c.close()
				return
			}
			c.flushed(len(buf))
		}
		c.mu.Lock()
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0]
		} else {
			c.spare = nil
		}
		c.mu.Unlock()
	}
}

// readChunk is the most the read loop allocates for a frame before its
// bytes arrive: a frame's buffer starts at this size (or the frame's, if
// smaller) and doubles as bytes come in, so a peer that declares a large
// frame and sends nothing holds almost no memory.
const readChunk = 4 << 10

// maxHandshakeFrame caps the frames a connection may send before CONNECT.
// A CONNECT with its authentication data fits easily.
const maxHandshakeFrame = 64 << 10

func (c *conn) readLoop() {
	defer c.b.wg.Done()
	defer func() {
		c.close()
		c.b.mu.Lock()
		c.b.removeConnLocked(c)
		c.b.mu.Unlock()
	}()
	// The handshake (every byte up to and including CONNECT) has a
	// deadline: a peer that connects and then stays silent, or sends its
	// bytes one at a time, is closed when it passes.
	handshaking := true
	_ = c.nc.SetReadDeadline(time.Now().Add(c.b.opts.HandshakeTimeout))
	r := bufio.NewReaderSize(c.nc, 16<<10)
	var hdr [8]byte
	var scratch []byte
	for {
		if _, err := io.ReadFull(r, hdr[:4]); err != nil {
			c.logReadErr(err, handshaking)
			return
		}
		total := binary.BigEndian.Uint32(hdr[:4])
		limit := uint32(maxFrameSize)
		if handshaking {
			limit = maxHandshakeFrame
		}
		if total < 4 || total > limit {
			c.b.log.Warn("pulsartest: bad frame size, closing connection", "conn", c.id, "size", total, "limit", limit)
			return
		}
		if _, err := io.ReadFull(r, hdr[4:8]); err != nil {
			c.logReadErr(err, handshaking)
			return
		}
		cmdSize := binary.BigEndian.Uint32(hdr[4:8])
		c.b.framesBegun.Add(1)
		if cmdSize > total-4 {
			c.b.log.Warn("pulsartest: bad command size, closing connection", "conn", c.id, "size", cmdSize)
			return
		}
		var (
			frame []byte
			err   error
		)
		if cmdSize == total-4 {
			frame, err = readGrowing(r, scratch, int(cmdSize))
			if cap(frame) <= 1<<20 {
				scratch = frame[:0]
			}
		} else {
			// Payload frames are kept: the payload becomes the stored entry.
			frame, err = readGrowing(r, nil, int(total-4))
		}
		if err != nil {
			c.logReadErr(err, handshaking)
			return
		}
		cmd, err := decodeBase(frame[:cmdSize])
		if err != nil {
			c.b.log.Warn("pulsartest: undecodable command, closing connection", "conn", c.id, "error", err)
			return
		}
		var payload []byte
		if cmdSize < total-4 {
			payload = frame[cmdSize:]
		}
		if !c.awaitRoom() || !c.handle(cmd, payload) {
			return
		}
		if handshaking && cmd.typ == cmdConnect {
			handshaking = false
			_ = c.nc.SetReadDeadline(time.Time{})
		}
	}
}

// readGrowing reads exactly n bytes from r into buf's backing array when it
// is large enough, else into a buffer that starts at readChunk bytes and
// doubles (up to n) as bytes arrive.
func readGrowing(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) >= n {
		buf = buf[:n]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	buf = buf[:0]
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), readChunk), n-len(buf)))
		}
		m, err := r.Read(buf[len(buf):min(cap(buf), n)])
		buf = buf[:len(buf)+m]
		if err != nil && len(buf) < n {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return buf, err
		}
	}
	return buf, nil
}

// logWriteErr logs why a write failed; one that timed out is counted in
// BrokerStats.WriteTimeouts.
func (c *conn) logWriteErr(err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.b.log.Debug("pulsartest write failed", "conn", c.id, "error", err)
		return
	}
	c.b.log.Warn("pulsartest: client did not read what was queued within the write timeout, closing connection",
		"conn", c.id, "timeout", c.b.opts.WriteTimeout, "queued", c.queued.Load())
	c.b.mu.Lock()
	c.b.stats.WriteTimeouts++
	c.b.mu.Unlock()
}

func (c *conn) logReadErr(err error, handshaking bool) {
	if handshaking && errors.Is(err, os.ErrDeadlineExceeded) {
		c.b.log.Warn("pulsartest: no CONNECT within the handshake timeout, closing connection",
			"conn", c.id, "timeout", c.b.opts.HandshakeTimeout)
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		c.b.log.Debug("pulsartest connection closed", "conn", c.id)
		return
	}
	c.b.log.Debug("pulsartest read failed", "conn", c.id, "error", err)
}

// handle runs one command; false closes the connection.
func (c *conn) handle(cmd command, payload []byte) bool {
	b := c.b
	if !c.connected && cmd.typ != cmdConnect {
		b.log.Warn("pulsartest: command before CONNECT, closing connection", "conn", c.id, "command", cmdName(cmd.typ))
		return false
	}
	if b.withholding.Load() != 0 && !c.awaitRelease(cmd.typ) {
		return false
	}
	switch cmd.typ {
	case cmdConnect:
		return c.handleConnect(cmd.body)
	case cmdPing:
		b.mu.Lock()
		b.stats.Pings++
		b.mu.Unlock()
		c.write(func(o []byte) []byte {
			o, fs, bs := beginFrame(o, cmdPong)
			return endFrame(o, cmdPong, fs, bs, nil)
		})
		return true
	case cmdPong:
		return true
	case cmdPartitionedMeta:
		return c.handlePartitionedMeta(cmd.body)
	case cmdLookup:
		return c.handleLookup(cmd.body)
	case cmdProducer:
		return b.handleProducer(c, cmd.body)
	case cmdSend:
		return b.handleSend(c, cmd.body, payload)
	case cmdCloseProducer:
		return b.handleCloseProducer(c, cmd.body)
	case cmdSubscribe:
		return b.handleSubscribe(c, cmd.body)
	case cmdFlow:
		return b.handleFlow(c, cmd.body)
	case cmdAck:
		return b.handleAck(c, cmd.body)
	case cmdRedeliver:
		return b.handleRedeliver(c, cmd.body)
	case cmdCloseConsumer:
		return b.handleCloseConsumer(c, cmd.body)
	case cmdUnsubscribe:
		return b.handleUnsubscribe(c, cmd.body)
	case cmdGetLastMessageID:
		return b.handleGetLastMessageID(c, cmd.body)
	case cmdSeek:
		return b.handleSeek(c, cmd.body)
	case cmdGetTopicsOfNamespace:
		return b.handleGetTopicsOfNamespace(c, cmd.body)
	default:
		return c.unsupported(cmd)
	}
}

// awaitRelease waits, when the broker withholds commands of type typ
// (Withhold), until they are released; the connection is not read
// meanwhile. It returns false when the connection or the broker closed
// first.
func (c *conn) awaitRelease(typ int) bool {
	b := c.b
	b.mu.Lock()
	release := b.withheld[typ]
	if release == nil {
		b.mu.Unlock()
		return true
	}
	b.stats.Withheld++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.stats.Withheld--
		b.mu.Unlock()
	}()
	b.log.Debug("pulsartest: command withheld", "conn", c.id, "command", cmdName(typ))
	select {
	case <-release:
		return true
	case <-c.done:
		return false
	case <-b.done:
		return false
	}
}

// unsupported answers a command the broker does not implement with an
// ERROR carrying the command's request id, so the client call fails at
// once with a message that names the command.
func (c *conn) unsupported(cmd command) bool {
	msg := "pulsartest does not support " + cmdName(cmd.typ)
	c.b.mu.Lock()
	c.b.stats.UnsupportedCommands++
	c.b.mu.Unlock()
	c.b.log.Warn("pulsartest: unsupported command", "conn", c.id, "command", cmdName(cmd.typ))
	num, ok := requestIDField[cmd.typ]
	if !ok {
		// No request to fail; the client would wait for nothing. Closing
		// the connection makes the failure visible.
		return false
	}
	f, err := decodeFlat(cmd.body)
	if err != nil {
		return false
	}
	c.sendError(f.u[num], NotAllowedError, msg)
	return true
}

func (c *conn) handleConnect(body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	if c.connected {
		c.sendError(0, NotAllowedError, "pulsartest: duplicate CONNECT")
		return true
	}
	if !c.authenticated(f) {
		return false
	}
	version := int32(f.u[4])
	if version > maxProtocolVersion {
		version = maxProtocolVersion
	}
	c.b.mu.Lock()
	c.connected = true
	c.b.mu.Unlock()
	c.b.log.Debug("pulsartest client connected", "conn", c.id, "client", f.str(1), "protocol", version)
	maxSize := c.b.opts.MaxMessageSize
	server := c.b.opts.ServerVersion
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdConnected)
		o = appendStringField(o, 1, server)
		o = appendVarintField(o, 2, uint64(version))
		o = appendVarintField(o, 3, uint64(maxSize))
		return endFrame(o, cmdConnected, fs, bs, nil)
	})
	return true
}

// authenticated reports whether the CONNECT f carries the credentials
// Options.AuthToken requires (always, when it is unset). When it does not,
// it answers as Pulsar's ServerCnx does a failed authentication, an ERROR
// with request id -1, code AuthenticationError and no detail, written to
// the socket before the caller closes the connection.
func (c *conn) authenticated(f flat) bool {
	want := c.b.opts.AuthToken
	if want == "" {
		return true
	}
	method := f.str(5)
	if method == "token" && subtle.ConstantTimeCompare(f.bs[3], []byte(want)) == 1 {
		return true
	}
	c.b.mu.Lock()
	c.b.stats.AuthenticationFailures++
	c.b.mu.Unlock()
	c.b.log.Warn("pulsartest: authentication failed, closing connection", "conn", c.id,
		"auth_method", method, "credentials", len(f.bs[3]) > 0)
	// Nothing is queued before CONNECT: the frame goes out alone, ahead
	// of the close.
	var o []byte
	o, fs, bs := beginFrame(o, cmdError)
	o = appendVarintField(o, 1, math.MaxUint64)
	o = appendVarintField(o, 2, uint64(AuthenticationError))
	o = appendStringField(o, 3, "Failed to authenticate")
	o = endFrame(o, cmdError, fs, bs, nil)
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.b.opts.WriteTimeout))
	if _, err := c.nc.Write(o); err != nil {
		c.logWriteErr(err)
	}
	return false
}

func (c *conn) handlePartitionedMeta(body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	reqID := f.u[2]
	tn, err := parseTopic(f.str(1))
	if err != nil {
		c.write(func(o []byte) []byte {
			o, fs, bs := beginFrame(o, cmdPartitionedMetaResp)
			o = appendVarintField(o, 2, reqID)
			o = appendVarintField(o, 3, 1)
			o = appendVarintField(o, 4, uint64(InvalidTopicName))
			o = appendStringField(o, 5, err.Error())
			return endFrame(o, cmdPartitionedMetaResp, fs, bs, nil)
		})
		return true
	}
	c.b.mu.Lock()
	n := c.b.partitioned[tn.full]
	c.b.mu.Unlock()
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdPartitionedMetaResp)
		o = appendVarintField(o, 1, uint64(n))
		o = appendVarintField(o, 2, reqID)
		o = appendVarintField(o, 3, 0)
		return endFrame(o, cmdPartitionedMetaResp, fs, bs, nil)
	})
	return true
}

func (c *conn) handleLookup(body []byte) bool {
	f, err := decodeFlat(body)
	if err != nil {
		return false
	}
	reqID := f.u[2]
	url := c.b.url
	if _, err := parseTopic(f.str(1)); err != nil {
		c.write(func(o []byte) []byte {
			o, fs, bs := beginFrame(o, cmdLookupResp)
			o = appendVarintField(o, 3, 2) // Failed
			o = appendVarintField(o, 4, reqID)
			o = appendVarintField(o, 6, uint64(InvalidTopicName))
			o = appendStringField(o, 7, err.Error())
			return endFrame(o, cmdLookupResp, fs, bs, nil)
		})
		return true
	}
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdLookupResp)
		o = appendStringField(o, 1, url)
		o = appendVarintField(o, 3, 1) // Connect
		o = appendVarintField(o, 4, reqID)
		o = appendBoolField(o, 5, true)
		o = appendBoolField(o, 8, false)
		return endFrame(o, cmdLookupResp, fs, bs, nil)
	})
	return true
}

// ---- replies used by several handlers ----

func (c *conn) sendSuccess(reqID uint64) {
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdSuccess)
		o = appendVarintField(o, 1, reqID)
		return endFrame(o, cmdSuccess, fs, bs, nil)
	})
}

func (c *conn) sendError(reqID uint64, code ServerErrorCode, msg string) {
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdError)
		o = appendVarintField(o, 1, reqID)
		o = appendVarintField(o, 2, uint64(code))
		o = appendStringField(o, 3, msg)
		return endFrame(o, cmdError, fs, bs, nil)
	})
}

// sendClose tells the client the broker closed its consumer or producer
// id (typ is cmdCloseConsumer or cmdCloseProducer; both carry the id in
// field 1 and a request id in field 2): the client reconnects it.
func (c *conn) sendClose(typ int, id uint64) {
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, typ)
		o = appendVarintField(o, 1, id)
		o = appendVarintField(o, 2, 0)
		return endFrame(o, typ, fs, bs, nil)
	})
}

func (c *conn) sendActiveChange(consumerID uint64, active bool) {
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdActiveConsumerChange)
		o = appendVarintField(o, 1, consumerID)
		o = appendBoolField(o, 2, active)
		return endFrame(o, cmdActiveConsumerChange, fs, bs, nil)
	})
}

// sendMessage pushes one entry to a consumer. ackSet, when not nil, lists
// the batch indexes still unacknowledged (bit set = deliver).
func (c *conn) sendMessage(consumerID uint64, id msgID, redeliveries uint32, ackSet []uint64, data []byte) {
	c.write(func(o []byte) []byte {
		o, fs, bs := beginFrame(o, cmdMessage)
		o = appendVarintField(o, 1, consumerID)
		o = appendMsgID(o, 2, id)
		if redeliveries > 0 {
			o = appendVarintField(o, 3, uint64(redeliveries))
		}
		for _, w := range ackSet {
			o = appendVarintField(o, 4, w)
		}
		return endFrame(o, cmdMessage, fs, bs, data)
	})
}
