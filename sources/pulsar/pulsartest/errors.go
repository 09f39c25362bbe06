package pulsartest

import (
	"errors"
	"fmt"
)

// ServerErrorCode is a Pulsar ServerError code as sent in CommandError and
// CommandSendError. Only the codes the broker uses are named.
type ServerErrorCode int32

// ServerError codes (values per the Pulsar wire protocol).
const (
	UnknownError        ServerErrorCode = 0
	MetadataError       ServerErrorCode = 1
	PersistenceError    ServerErrorCode = 2
	AuthenticationError ServerErrorCode = 3
	AuthorizationError  ServerErrorCode = 4
	ConsumerBusy        ServerErrorCode = 5
	ServiceNotReady     ServerErrorCode = 6
	// ProducerBlockedQuotaExceededError refuses a producer on a topic
	// over a producer_request_hold backlog quota.
	ProducerBlockedQuotaExceededError ServerErrorCode = 7
	// ProducerBlockedQuotaExceededException refuses a producer on a
	// topic over a producer_exception backlog quota.
	ProducerBlockedQuotaExceededException ServerErrorCode = 8
	ChecksumError                         ServerErrorCode = 9
	UnsupportedVersionError               ServerErrorCode = 10
	TopicNotFound                         ServerErrorCode = 11
	SubscriptionNotFound                  ServerErrorCode = 12
	ConsumerNotFound                      ServerErrorCode = 13
	TooManyRequests                       ServerErrorCode = 14
	ProducerBusy                          ServerErrorCode = 16
	InvalidTopicName                      ServerErrorCode = 17
	ConsumerAssignError                   ServerErrorCode = 19
	NotAllowedError                       ServerErrorCode = 22
)

// ServerError is an error the broker sends to a client as a protocol error.
// Pass one to RefuseSubscribe to choose the code the client sees.
type ServerError struct {
	// Code is the protocol's error code the client sees.
	Code ServerErrorCode
	// Message is the error text the client sees.
	Message string
	// Err is an optional cause, returned by Unwrap.
	Err error
}

// Error returns "pulsartest: server error CODE: MESSAGE".
func (e *ServerError) Error() string {
	return fmt.Sprintf("pulsartest: server error %d: %s", e.Code, e.Message)
}

// Unwrap returns the cause, if any.
func (e *ServerError) Unwrap() error { return e.Err }

// asServerError converts err into the code and message sent to a client:
// a *ServerError keeps its code, anything else becomes ServiceNotReady
// (which pulsar-client-go treats as retryable) with err's text.
func asServerError(err error) (ServerErrorCode, string) {
	var se *ServerError
	if errors.As(err, &se) {
		return se.Code, se.Message
	}
	return ServiceNotReady, err.Error()
}
