package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/boulevard-go/boulevard/observe"
)

// serve serves the pipeline's metrics and health endpoints on addr until
// the returned function is called.
func serve(addr string, p observe.Pipeline, stdout io.Writer) (stop func(), err error) {
	obs := observe.New(observe.Options{})
	obs.Add(p)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-http: %w", err)
	}
	srv := &http.Server{Handler: obs.Handler(nil), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stdout, "quickstart: serving metrics:", err)
		}
	}()
	fmt.Fprintf(stdout, "metrics on http://%s/metrics, health on /healthz and /readyz\n", l.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}
