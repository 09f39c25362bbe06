//go:build unix

package benchsrc

import (
	"os"
	"syscall"
	"testing"
)

// TestUsageCountsFaultsOfFreshPages touches pages the process has never
// used and requires ReadUsage to count a fault for each.
func TestUsageCountsFaultsOfFreshPages(t *testing.T) {
	const pages = 256
	size := pages * os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("no anonymous mapping here: %v", err)
	}
	defer syscall.Munmap(mem)
	before := ReadUsage()
	for i := 0; i < size; i += os.Getpagesize() {
		mem[i] = 1
	}
	got := ReadUsage().Sub(before)
	if got.Faults < pages {
		t.Errorf("touching %d fresh pages counted %d faults, want at least %d", pages, got.Faults, pages)
	}
	if got.CPU < 0 {
		t.Errorf("CPU went backwards: %v", got.CPU)
	}
}
