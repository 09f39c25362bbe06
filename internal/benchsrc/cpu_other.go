//go:build !unix

package benchsrc

import "time"

// CPU is not measured on this system: CPU figures read 0.
func CPU() time.Duration { return 0 }
