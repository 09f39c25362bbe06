package pulsar

import (
	"log/slog"
	"testing"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"

	"github.com/boulevard-go/boulevard/internal/logtest"
	"github.com/boulevard-go/boulevard/internal/redact"
)

// closedClient is a pulsar.Client whose Close does nothing.
type closedClient struct{ pulsar.Client }

func (closedClient) Close() {}

// Guarantee: the lines saying the broker closed a consumer that the
// client's logger holds for the consumer's own line are logged as they
// came when the client closes.
func TestBrokerClosedConsumerLinesHeldAreLoggedWhenTheClientCloses(t *testing.T) {
	lines := new(logtest.Lines)
	l, closes := clientLogger(slog.New(slog.NewTextHandler(lines, nil)), new(lastFailure), redact.Secrets{})
	conn := l.SubLogger(plog.Fields{"remote_addr": "pulsar://10.0.0.7:6650"})
	conn.Infof("Broker notification of Closed consumer: %d", 5)
	conn.Infof("Broker notification of Closed consumer: %d", 6)
	if n := lines.Count("Broker notification"); n != 0 {
		t.Fatalf("%d lines before the consumers' own and before Close, want 0", n)
	}
	c := &Client{Client: closedClient{}, closes: closes}
	c.Close()
	lines.Want(t, 1, "INFO lines for consumer 5", "level=INFO", "Broker notification of Closed consumer: 5", "remote_addr=pulsar://10.0.0.7:6650")
	lines.Want(t, 1, "INFO lines for consumer 6", "level=INFO", "Broker notification of Closed consumer: 6", "remote_addr=pulsar://10.0.0.7:6650")
}
