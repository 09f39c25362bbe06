package kafkatopic

import (
	"context"
	"sync"

	"github.com/IBM/sarama"
)

// completion is one publish handed to the producer: the record and the
// channel its broker acknowledgement (or failure) is reported on. The
// producer's one result goroutine reports it; there is no goroutine per
// message, and completions are recycled once their publisher has read a
// success (a failed record may still be read by sarama after it reported
// it).
type completion struct {
	msg  sarama.ProducerMessage
	hdr  []sarama.RecordHeader // msg.Headers' backing array, kept for reuse
	done chan error            // buffered 1
}

// producer feeds one sarama AsyncProducer, directly or through a bounded
// buffer (Options.PublishBuffer) that TryPublish can use without waiting,
// and reports each record's outcome to its completion.
type producer struct {
	ap   sarama.AsyncProducer
	in   chan *completion
	pool sync.Pool

	mu     sync.RWMutex // held shared while enqueueing; exclusively to close
	closed bool
	stop   chan struct{} // closed by close: publishers waiting for room give up
	once   sync.Once

	wg sync.WaitGroup
}

func newProducer(client sarama.Client, buffer int) (*producer, error) {
	ap, err := sarama.NewAsyncProducerFromClient(client)
	if err != nil {
		return nil, err
	}
	p := &producer{ap: ap, in: make(chan *completion, buffer), stop: make(chan struct{})}
	p.pool.New = func() any { return &completion{done: make(chan error, 1)} }
	p.wg.Add(2)
	go p.feed()
	go p.results()
	return p, nil
}

// get returns a fresh completion.
func (p *producer) get() *completion { return p.pool.Get().(*completion) }

// put recycles c, whose result has been read.
func (p *producer) put(c *completion) {
	if cap(c.msg.Headers) > 0 && cap(c.msg.Headers) <= 64 {
		c.hdr = c.msg.Headers[:0]
		clear(c.hdr[:cap(c.hdr)])
	}
	c.msg = sarama.ProducerMessage{}
	p.pool.Put(c)
}

// feed hands buffered records to sarama, in order.
func (p *producer) feed() {
	defer p.wg.Done()
	for c := range p.in {
		p.ap.Input() <- &c.msg
	}
	p.ap.AsyncClose()
}

// results reports every record's outcome to its completion.
func (p *producer) results() {
	defer p.wg.Done()
	succ, errs := p.ap.Successes(), p.ap.Errors()
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
			e.Msg.Metadata.(*completion).done <- e.Err
		}
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
	input := p.ap.Input()
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
// record it was handed, and waits for the outcomes to be reported.
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
