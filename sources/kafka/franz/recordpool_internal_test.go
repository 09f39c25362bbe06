package franz

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/boulevard-go/boulevard/internal/wait"
	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
)

// decompressPool is a user's kgo.PoolDecompressBytes: franz-go decompresses
// record batches into its buffers and, once every record of a batch is
// recycled, zeroes the buffer and puts it back.
type decompressPool struct{ gets, puts atomic.Int64 }

func (p *decompressPool) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	p.gets.Add(1)
	return make([]byte, 0, 4*len(compressed))
}

func (p *decompressPool) PutDecompressBytes([]byte) { p.puts.Add(1) }

// Guarantee: the source recycles each fetched record once its message is
// delivered, so that every decoded batch's record slice goes back to the
// source's pool and later fetches decode into reused memory. When the
// client has a pool of decompression buffers (which the messages' values
// point into until their outcome), it recycles nothing, and every handler
// sees its record's value intact.
func TestRecordsRecycledOnceDelivered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		userPool bool
	}{{"source pool only", false}, {"user decompression pool", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const topic = "recycled"
			c := batchedCluster(t, topic)

			user := &decompressPool{}
			opts := Options{Brokers: c.ListenAddrs(), GroupID: "g-" + tc.name, Topics: []string{topic}, InitialOffset: "earliest"}
			if tc.userPool {
				opts.ClientOptions = []kgo.Opt{kgo.WithPools(user)}
			}
			src, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var bad []string
			handled := map[int64]bool{}
			p := startRecycling(t, src, func(md *Metadata, value []byte) error {
				want := bytes.Repeat([]byte("v"+string(md.Key[1:])+"."), 8)
				mu.Lock()
				defer mu.Unlock()
				if !bytes.Equal(value, want) {
					bad = append(bad, fmt.Sprintf("offset %d: value %q, key %q", md.Offset, value, md.Key))
				}
				handled[md.Offset] = true
				return nil
			})
			wait.For(t, "every record handled", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(handled) == recordBatches*recordsPerBatch
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			// The source's readers have returned: every record they
			// delivered was recycled, or never will be.
			if len(bad) > 0 {
				t.Errorf("%d handlers saw a value that was not their record's, the first: %s", len(bad), bad[0])
			}
			gets, puts := src.records.gets.Load(), src.records.puts.Load()
			if tc.userPool {
				if user.gets.Load() == 0 {
					t.Fatal("the batches were not decompressed into the user's pool: the test does not exercise it")
				}
				if puts != 0 || user.puts.Load() != 0 {
					t.Errorf("with a decompression pool, %d record slices and %d decompression buffers came back: records were recycled while their messages could still be in the pipeline",
						puts, user.puts.Load())
				}
				return
			}
			if gets < 1 || puts != gets {
				t.Errorf("the source's pool handed out %d record slices and took %d back, want every one back", gets, puts)
			}
		})
	}
}

// recordBatches record batches of recordsPerBatch records each are what
// batchedCluster holds.
const recordBatches, recordsPerBatch = 12, 40

// batchedCluster starts a one-broker kfake cluster whose topic holds
// recordBatches lz4 batches of recordsPerBatch records; record i has key
// "k<i>" and value "v<i>." eight times.
func batchedCluster(t *testing.T, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for b := range recordBatches {
		recs := make([]*kgo.Record, recordsPerBatch)
		for i := range recs {
			v := strconv.Itoa(b*recordsPerBatch + i)
			recs[i] = &kgo.Record{Key: []byte("k" + v), Value: bytes.Repeat([]byte("v"+v+"."), 8)}
		}
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Guarantee: records the source drops without delivering them are
// recycled too, so every decoded batch's record slice still goes back to
// the pool: the read-ahead and polled records a rewind for redelivery
// throws away, and those a claim holds when it ends (a stop, a revoke or a
// lost partition end it the same way).
func TestRecordSlicesReturnedWhenRecordsAreDropped(t *testing.T) {
	t.Run("rewound for redelivery", func(t *testing.T) {
		const topic = "rewound"
		c := batchedCluster(t, topic)
		src, err := New(Options{Brokers: c.ListenAddrs(), GroupID: "g", Topics: []string{topic}, InitialOffset: "earliest",
			FailurePolicy: FailureRedeliver, RedeliveryBackoff: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		handled := map[int64]bool{}
		failed := false
		p := startRecycling(t, src, func(md *Metadata, _ []byte) error {
			mu.Lock()
			defer mu.Unlock()
			if md.Offset == 10 && !failed {
				failed = true
				return errors.New("fails once")
			}
			handled[md.Offset] = true
			return nil
		})
		wait.For(t, "every record handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(handled) == recordBatches*recordsPerBatch
		})
		stopAndCountSlices(t, p, src)
	})
	t.Run("claim ended with records read ahead", func(t *testing.T) {
		const topic = "ended"
		c := batchedCluster(t, topic)
		src, err := New(Options{Brokers: c.ListenAddrs(), GroupID: "g", Topics: []string{topic}, InitialOffset: "earliest"})
		if err != nil {
			t.Fatal(err)
		}
		// The handler holds its first message until the claim has taken
		// every record from the client, so that most of them wait in the
		// claim, undelivered, when it ends.
		release := make(chan struct{})
		p := startRecycling(t, src, func(*Metadata, []byte) error {
			<-release
			return nil
		})
		wait.For(t, "every record taken by the claim", func() bool {
			for _, m := range src.Stats().Members {
				for _, ps := range m.Partitions {
					return ps.Next == recordBatches*recordsPerBatch && ps.ReadAhead > 0
				}
			}
			return false
		})
		close(release)
		stopAndCountSlices(t, p, src)
	})
}

// startRecycling starts a pipeline reading src (window 30, two
// processors) whose handler calls handle with each message's metadata and
// value.
func startRecycling(t *testing.T, src *Source, handle func(*Metadata, []byte) error) *pipeline.Pipeline[[]byte, []byte] {
	t.Helper()
	p, err := pipeline.New(pipeline.Options[[]byte, []byte]{
		Name:     "recycle",
		Producer: producer.Options[[]byte]{Source: src, Flow: producer.Flow{Initial: 30}},
		Processors: processor.Options[[]byte, []byte]{
			Concurrency: 2,
			Handle: func(_ context.Context, m *message.Message[[]byte]) ([]byte, error) {
				md, _ := message.MetadataAs[*Metadata](m)
				return m.Data, handle(md, m.Data)
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// stopAndCountSlices stops p and checks that src's record pool took back
// every slice it handed out.
func stopAndCountSlices(t *testing.T, p *pipeline.Pipeline[[]byte, []byte], src *Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if gets, puts := src.records.gets.Load(), src.records.puts.Load(); gets < 1 || puts != gets {
		t.Errorf("the source's pool handed out %d record slices and took %d back, want every one back", gets, puts)
	}
}

// Guarantee: a slice from the record pool always has room for the batch it
// was asked for, whatever slices went back into the pool before, so that
// franz-go never grows (copies) it while decoding.
func TestRecordPoolSlicesHoldTheBatch(t *testing.T) {
	var p recordPool
	for _, back := range []int{0, 1, 3, 1000, 1024, 4097} {
		p.PutRecords(make([]kgo.Record, min(7, back), back))
	}
	for _, n := range []int{0, 1, 2, 3, 500, 512, 513, 1000, 1024, 1025, 4097, 1 << 20} {
		if s := p.GetRecords(n); len(s) != 0 || cap(s) < n {
			t.Errorf("GetRecords(%d) = len %d cap %d, want len 0 and cap at least %d", n, len(s), cap(s), n)
		}
	}
}
