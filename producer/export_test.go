package producer

// The producer runtime under the names the package's tests use.
type (
	Producer[T any]  = runtime[T]
	Config[T any]    = runtimeConfig[T]
	Output[T any]    = output[T]
	TryOutput[T any] = directOutput[T]
)

// New builds the producer runtime; opts must carry its defaults.
func New[T any](opts Options[T], cfg Config[T]) *Producer[T] { return newRuntime(opts, cfg) }
