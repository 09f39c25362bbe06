package kafkatopic

import "github.com/boulevard-go/boulevard/topic"

// Codec is the topic layer's codec (topic.Codec): it turns values into
// record payloads and back.
type Codec[T any] = topic.Codec[T]
