package kafkatopic

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"

	"github.com/boulevard-go/boulevard/internal/kafkaalone"
)

// completion is one publish handed to the producer: the record and the
// channel its broker acknowledgement (or failure) is reported on. The
// producer's result goroutines report it; there is no goroutine per
// message, and completions are recycled once their publisher has read a
// success (a failed record may still be read by sarama after it reported
// it).
type completion struct {
	msg  sarama.ProducerMessage
	hdr  []sarama.RecordHeader // msg.Headers' backing array, kept for reuse
	hbuf []byte                // the bytes of the envelope's headers in msg.Headers, kept for reuse
	done chan error            // buffered 1
	// alone, set by the publisher before handing the completion over,
	// sends the record through the producer's single-record producer.
	alone bool
	// resent is set by the batching producer's result goroutine when the
	// broker refused the record's batch as too large, or as out of order
	// (OUT_OF_ORDER_SEQUENCE_NUMBER), and a copy of the record was handed
	// to the single-record producer, and by the single-record producer's
	// when the broker refused its record as out of order and a copy was
	// sent through a fresh producer (sendFresh): the outcome reported is
	// the copy's, the completion is not recycled, and the interceptors of
	// the producer sending the copy skip it (aloneConfig).
	resent bool
}

// producer feeds two sarama AsyncProducers, directly or through a bounded
// buffer (Options.PublishBuffer) that TryPublish can use without waiting,
// and reports each record's outcome to its completion. ap batches the
// records, as many as its configuration lets it put in one request;
// alone sends each record in a request of its own, so that the broker's
// refusal of a record larger than the topic accepts (MESSAGE_TOO_LARGE,
// which fails every record of the batch) takes no other record with it.
// alone takes the records the publisher knows to be over the topic's
// limit, and a copy of each record of a batch ap had refused as too large.
type producer struct {
	ap    sarama.AsyncProducer
	alone sarama.AsyncProducer
	// aloneClient is alone's own client, closed once alone has closed.
	aloneClient sarama.Client
	in          chan *completion
	pool        sync.Pool

	mu     sync.RWMutex // held shared while enqueueing; exclusively to close
	closed bool
	stop   chan struct{} // closed by close: publishers waiting for room give up
	once   sync.Once

	wg sync.WaitGroup

	// fresh are the records the single-record producer refused as out of
	// order, in order, waiting for sendFreshAll, which freshMore wakes;
	// freshEnd says no more come, and freshDone is closed once
	// sendFreshAll has reported the outcome of each and returned.
	freshMu   sync.Mutex
	fresh     []refusedRecord
	freshEnd  bool
	freshMore chan struct{} // cap 1
	freshDone chan struct{}
}

// refusedRecord is a copy of a record to send through a fresh producer,
// and the error its refusal gave.
type refusedRecord struct {
	m       *sarama.ProducerMessage
	refused error
}

// newProducer starts a producer whose batching producer shares client and
// whose single-record producer has a client of its own, on brokers with
// aloneConfig(cfg).
func newProducer(client sarama.Client, brokers []string, cfg *sarama.Config, buffer int) (*producer, error) {
	aloneClient, err := sarama.NewClient(brokers, aloneConfig(cfg))
	if err != nil {
		return nil, err
	}
	alone, err := sarama.NewAsyncProducerFromClient(aloneClient)
	if err != nil {
		_ = aloneClient.Close()
		return nil, err
	}
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		_ = alone.Close()
		_ = aloneClient.Close()
		return nil, err
	}
	p := &producer{ap: ap, alone: alone, aloneClient: aloneClient, in: make(chan *completion, buffer), stop: make(chan struct{}),
		freshMore: make(chan struct{}, 1), freshDone: make(chan struct{})}
	p.pool.New = func() any { return &completion{done: make(chan error, 1)} }
	p.wg.Add(3)
	go p.feed()
	go p.results(ap, true)
	go p.results(alone, false)
	go p.sendFreshAll()
	return p, nil
}

// aloneConfig is cfg for a producer that puts one record in each request
// and sends it at once, and whose interceptors leave resent records alone:
// the copies resend makes already went through them in the batching
// producer, and only skipping the second pass leaves a resent record as it
// would have been sent once (restoring the headers the backend set and
// running the interceptors again would still apply their changes to the
// key, value or topic twice, and call them twice).
func aloneConfig(cfg *sarama.Config) *sarama.Config { return kafkaalone.Config(cfg, resentCopy) }

// resentCopy reports whether m is a copy resend made.
func resentCopy(m *sarama.ProducerMessage) bool {
	c, ok := m.Metadata.(*completion)
	return ok && c.resent
}

// maxKeptHeaderBytes is the largest array of header bytes a recycled
// completion keeps for its next record.
const maxKeptHeaderBytes = 4096

// get returns a fresh completion.
func (p *producer) get() *completion { return p.pool.Get().(*completion) }

// put recycles c, whose result has been read.
func (p *producer) put(c *completion) {
	if cap(c.msg.Headers) > 0 && cap(c.msg.Headers) <= 64 {
		c.hdr = c.msg.Headers[:0]
		clear(c.hdr[:cap(c.hdr)])
	}
	if cap(c.hbuf) > maxKeptHeaderBytes {
		c.hbuf = nil
	}
	c.msg = sarama.ProducerMessage{}
	c.alone, c.resent = false, false
	p.pool.Put(c)
}

// input returns the input of the sarama producer c goes to.
func (p *producer) input(c *completion) chan<- *sarama.ProducerMessage {
	if c.alone {
		return p.alone.Input()
	}
	return p.ap.Input()
}

// feed hands buffered records to sarama, in order.
func (p *producer) feed() {
	defer p.wg.Done()
	for c := range p.in {
		p.input(c) <- &c.msg
	}
	p.ap.AsyncClose()
}

// results reports the outcome of every record of ap to its completion.
// With batching (ap is the batching producer), a record refused as too
// large is not reported: the broker refuses a whole batch for one record
// over the limit, so a copy of each is sent again through the
// single-record producer, whose outcome is reported instead. So is a
// record refused as out of order (OUT_OF_ORDER_SEQUENCE_NUMBER): the
// broker stored none of its batch, having no sequence of the idempotent
// producer for the partition (a topic deleted and created again). The
// single-record producer, idempotent too, has sequences of its own for the
// partition, which the broker refuses as well when the topic was created
// again since that producer last sent to it: a record it refused as out of
// order is sent once more through a fresh producer (sendFresh, on a
// goroutine of its own, sendFreshAll, so that the outcomes of the
// single-record producer's other records are not held up meanwhile), and
// that outcome is the record's. So the backend sends a record again at
// most twice (sarama's own retries aside). Once ap has closed, so does
// the single-record producer (the last to receive records), and once that
// has closed and the records it refused have been sent again, its client.
func (p *producer) results(ap sarama.AsyncProducer, batching bool) {
	defer p.wg.Done()
	succ, errs := ap.Successes(), ap.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			m.Metadata.(*completion).done <- nil
		case e, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			c := e.Msg.Metadata.(*completion)
			if batching && (errors.Is(e.Err, sarama.ErrMessageSizeTooLarge) || errors.Is(e.Err, sarama.ErrOutOfOrderSequenceNumber)) {
				c.resent = true
				p.alone.Input() <- resend(c)
				continue
			}
			if !batching && errors.Is(e.Err, sarama.ErrOutOfOrderSequenceNumber) {
				c.resent = true
				p.queueFresh(refusedRecord{m: resend(c), refused: e.Err})
				continue
			}
			c.done <- e.Err
		}
	}
	if batching {
		p.alone.AsyncClose()
	} else {
		p.endFresh()
		_ = p.aloneClient.Close()
	}
}

// queueFresh hands r to sendFreshAll.
func (p *producer) queueFresh(r refusedRecord) { p.toFresh(func() { p.fresh = append(p.fresh, r) }) }

// endFresh tells sendFreshAll that no more records come, and waits until
// it has reported the outcome of those it has and returned.
func (p *producer) endFresh() {
	p.toFresh(func() { p.freshEnd = true })
	<-p.freshDone
}

// toFresh runs change, on what sendFreshAll is to do, under freshMu, and
// wakes sendFreshAll.
func (p *producer) toFresh(change func()) {
	p.freshMu.Lock()
	change()
	p.freshMu.Unlock()
	select {
	case p.freshMore <- struct{}{}:
	default:
	}
}

// sendFreshAll sends each record queueFresh hands it through sendFresh,
// one at a time in the order handed, and reports its outcome to its
// completion, until endFresh.
func (p *producer) sendFreshAll() {
	defer close(p.freshDone)
	for {
		p.freshMu.Lock()
		rs, end := p.fresh, p.freshEnd
		p.fresh = nil
		p.freshMu.Unlock()
		for _, r := range rs {
			r.m.Metadata.(*completion).done <- p.sendFresh(r.m, r.refused)
		}
		if len(rs) == 0 {
			if end {
				return
			}
			<-p.freshMore
		}
	}
}

// sendFresh sends m, a copy of a record the single-record producer
// refused as out of order (refused, its error), through an idempotent
// producer made for it on the single-record producer's client and closed
// once it has its outcome, which it returns. That producer has a producer
// id of its own and no sequence for any partition, so the broker takes its
// record as the first of a new producer; the single-record producer's
// sequences for the partition are those of a partition deleted and created
// again since it last sent to it (once more for the batching producer,
// whose refused record it was sending again). Its interceptors skip m, as
// the single-record producer's do (aloneConfig).
func (p *producer) sendFresh(m *sarama.ProducerMessage, refused error) error {
	fresh, err := sarama.NewSyncProducerFromClient(p.aloneClient)
	if err != nil {
		return fmt.Errorf("%w (a producer to send it again: %w)", refused, err)
	}
	_, _, err = fresh.SendMessage(m)
	_ = fresh.Close()
	return err
}

// resend returns a copy of c's record to send again, reported to c. The
// copy leaves c's record to the producer that failed it. It is the record
// as the batching producer's interceptors left it (their effects, on the
// headers, key, value or topic, are kept), and the single-record
// producer's interceptors skip it (aloneConfig; c.resent is set before the
// copy is handed over). It shares c's headers, backing array included:
// nothing writes to them any more (sarama only reads a record's headers,
// and no interceptor sees the copy), and a resent completion is never
// recycled, so c.hdr and c.hbuf never take those arrays back for another
// record.
func resend(c *completion) *sarama.ProducerMessage {
	return &sarama.ProducerMessage{
		Topic:     c.msg.Topic,
		Key:       c.msg.Key,
		Value:     c.msg.Value,
		Headers:   c.msg.Headers,
		Timestamp: c.msg.Timestamp,
		Metadata:  c,
	}
}

// enqueue hands c to the producer. With wait true it sends it straight to
// sarama's input, waiting until sarama takes it or ctx or abort ends
// (their error is returned, nothing was sent). With wait false it never
// waits: sarama's input if it is ready, else the buffer, else it reports
// false. errClosed is returned once the producer is closed.
func (p *producer) enqueue(ctx context.Context, c *completion, wait bool, abort <-chan struct{}, errClosed error) (bool, error) {
	c.msg.Metadata = c
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return false, errClosed
	}
	input := p.input(c)
	if !wait {
		select {
		case input <- &c.msg:
			return true, nil
		case p.in <- c:
			return true, nil
		default:
			return false, nil
		}
	}
	select {
	case input <- &c.msg:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-abort:
		return false, errClosed
	case <-p.stop:
		return false, errClosed
	}
}

// close stops accepting records, lets sarama deliver (or fail) every
// record it was handed (the batching producer first, then the
// single-record producer, which its refused batches may still feed), and
// waits for the outcomes to be reported.
func (p *producer) close() {
	p.once.Do(func() {
		close(p.stop)
		p.mu.Lock()
		p.closed = true
		close(p.in)
		p.mu.Unlock()
	})
	p.wg.Wait()
}
