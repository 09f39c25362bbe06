package observe_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/boulevard-go/boulevard/message"
	"github.com/boulevard-go/boulevard/observe"
	"github.com/boulevard-go/boulevard/pipeline"
	"github.com/boulevard-go/boulevard/processor"
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
