package observe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/topic/topology"
)

// Mounting the handler: the Observer is registered on the program's own
// registry (nothing global), and its handler serves /metrics, /healthz and
// /readyz under a prefix of the program's own server. Here an httptest
// server stands in for it; a real program listens on 127.0.0.1 or
// behind its own access control, never on every interface by default.
func Example() {
	ctx := context.Background()
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name: "greeter",
		Processors: processor.Options[string, string]{
			Handle: func(_ context.Context, m *message.Message[string]) (string, error) { return "hello " + m.Data, nil },
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	obs := observe.New(observe.Options{})
	// Close waits for the Stats calls the Observer started.
	defer obs.Close(ctx)
	if err := obs.Add(ctx, p); err != nil { // a second pipeline of the same name is refused
		fmt.Println(err)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)

	srv := httptest.NewServer(obs.Handler(reg))
	defer srv.Close()
	show := func(path string) {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s %d %s", path, resp.StatusCode, body)
	}

	show("/readyz") // not started yet
	_ = p.Start(ctx)
	_ = p.Push(ctx, message.New("ada", nil, 1))
	show("/readyz")
	show("/healthz")
	_ = p.Stop(ctx)

	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "boulevard_processor_messages_received_total") || strings.HasPrefix(line, "boulevard_pipeline_up") {
			fmt.Print(line)
		}
	}
	// Output:
	// /readyz 503 {"status":"not ready","pipelines":[{"name":"greeter","ok":false,"reason":"not started"}]}
	// /readyz 200 {"status":"ok","pipelines":[{"name":"greeter","ok":true}]}
	// /healthz 200 {"status":"ok","pipelines":[{"name":"greeter","ok":true}]}
	// boulevard_pipeline_up{pipeline="greeter"} 0
	// boulevard_processor_messages_received_total{pipeline="greeter"} 1
}

// Exporting a topology's source: its outcomes become counters labelled
// by the name it is added under, here after one order settled and one
// was rejected into the dead-letter queue.
func ExampleObserver_AddTopology() {
	ctx := context.Background()
	top, err := topology.New("orders").Hold(5 * time.Second).DLQ().Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	mem, err := topology.NewMemory[string](topology.MemoryOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mem.Close(ctx)
	q, err := mem.Declare(ctx, top)
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := topology.NewSource(topology.SourceOptions[string]{Queues: q, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pipeline.New(pipeline.Options[string, string]{
		Name:     "orders",
		Logger:   slog.New(slog.DiscardHandler),
		Producer: producer.Options[string]{Source: src},
		Processors: processor.Options[string, string]{Handle: func(_ context.Context, m *message.Message[string]) (string, error) {
			if m.Data == "malformed" {
				return "", topology.Reject(errors.New("malformed order"))
			}
			return m.Data, nil
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	obs := observe.New(observe.Options{})
	defer obs.Close(ctx)
	if err := errors.Join(obs.Add(ctx, p), obs.AddTopology("orders", src)); err != nil {
		fmt.Println(err)
		return
	}
	_ = p.Start(ctx)
	defer p.Stop(ctx)
	pub, _ := topology.NewPublisher(q, topology.PublisherOptions[string]{})
	_ = pub.Publish(ctx, "order-1")
	_ = pub.Publish(ctx, "malformed")
	for deadline := time.Now().Add(30 * time.Second); src.Stats().Acked+src.Stats().DeadLettered < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // poll: both orders settled
	}

	rr := httptest.NewRecorder()
	obs.Handler(nil).ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rr.Body.String()) {
		if strings.HasPrefix(line, "boulevard_topology_messages_") && !strings.Contains(line, "} 0") {
			fmt.Print(line)
		}
	}
	// Output:
	// boulevard_topology_messages_acked_total{topology="orders"} 1
	// boulevard_topology_messages_dead_lettered_total{reason="rejected",topology="orders"} 1
	// boulevard_topology_messages_received_total{topology="orders"} 2
}

// Serving the endpoints on an address of the program's own: Serve
// listens at once (":0" lets the system choose a port, on 127.0.0.1
// only, as any address without a host does) and serves until Close, which
// bounds how long a slow client can hold it.
func ExampleObserver_Serve() {
	ctx := context.Background()
	obs := observe.New(observe.Options{})
	defer obs.Close(ctx)
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs) // and the program's own collectors

	srv, err := obs.Serve(ctx, observe.ServerOptions{Addr: ":0", Gatherer: reg})
	if err != nil {
		fmt.Println(err) // a bad option, a port in use
		return
	}
	defer srv.Close(ctx)

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + srv.Addr() + "/healthz")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(strings.HasPrefix(srv.Addr(), "127.0.0.1:"), resp.StatusCode, string(body))
	// Output:
	// true 200 {"status":"ok","pipelines":[]}
}
