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

// BenchmarkFreshPageFault measures what the first touch of a page costs:
// the kernel maps it (and zeroes it) on a fault. It reports ns/fault, the
// figure to weigh a run's Faults by (an op touches 1024 fresh pages).
func BenchmarkFreshPageFault(b *testing.B) {
	b.ReportAllocs()
	page := os.Getpagesize()
	const chunk = 1024 // pages mapped at a time
	for b.Loop() {
		b.StopTimer()
		mem, err := syscall.Mmap(-1, 0, chunk*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Skipf("no anonymous mapping here: %v", err)
		}
		b.StartTimer()
		for i := 0; i < len(mem); i += page {
			mem[i] = 1
		}
		b.StopTimer()
		if err := syscall.Munmap(mem); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunk), "ns/fault")
}
