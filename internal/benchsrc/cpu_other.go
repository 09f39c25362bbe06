//go:build !unix

package benchsrc

// ReadUsage is not measured on this system: its figures read 0.
func ReadUsage() Usage { return Usage{} }
