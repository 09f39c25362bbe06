package pulsartopic_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/pulsartopic"
)

// Guarantee: once the broker has gone away after a topic was declared, a
// Subscribe to it, balanced or broadcast, fails within
// Options.SubscribeTimeout with an *Error wrapping ErrConnect that names
// the broker's service URL (without its user information) and the
// refusal; once the backend's Close has returned, no goroutine of the
// client is left running.
func TestSubscribeOnAGoneBrokerWrapsErrConnect(t *testing.T) {
	reconnectionsEnd(t) // the topic's producer reconnects after the broker went away
	const password = "pAssw0rd-in-URL-5e"
	b := testbroker.Pulsar(t)
	addr := b.Addr().String()
	o := testOptions[int](b, topic.IntCodec{})
	o.ServiceURL = "pulsar://user:" + password + "@" + addr
	o.SubscribeTimeout = 4 * time.Second
	o.ClientOptions.OperationTimeout = time.Second
	o.ClientOptions.ConnectionTimeout = time.Second
	be, err := pulsartopic.New(o)
	if err != nil {
		t.Fatal(err)
	}
	h, err := topic.NewTopic[int]("gone", topic.Options{Mode: topic.Mixed}, be)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []topic.SubscriptionMode{topic.Balanced("g"), topic.Broadcast()} {
		start := time.Now()
		_, err := h.Subscribe(context.Background(), mode, topic.SubscriberOptions{})
		if d := time.Since(start); d > o.SubscribeTimeout+time.Second {
			t.Errorf("Subscribe %v took %v with a subscribe timeout of %v", mode, d, o.SubscribeTimeout)
		}
		var perr *pulsartopic.Error
		if !errors.As(err, &perr) || !errors.Is(err, pulsartopic.ErrConnect) {
			t.Errorf("Subscribe %v once the broker has gone = %v, want a *pulsartopic.Error wrapping ErrConnect", mode, err)
			continue
		}
		// The cause is the client's latest connection failure: a refused
		// connection, or the topic's producer failing to reconnect.
		if _, cause, _ := strings.Cut(err.Error(), "broker pulsar://"+addr+": "); cause == "" {
			t.Errorf("Subscribe %v once the broker has gone = %v, want it to name the broker pulsar://%s and the cause", mode, err, addr)
		}
		if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), "user@") {
			t.Errorf("Subscribe %v once the broker has gone = %v, which shows the URL's user information", mode, err)
		}
	}
	h.Close()
	if err := be.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
