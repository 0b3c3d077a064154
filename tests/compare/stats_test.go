package main

import (
	"os"
	"testing"
	"time"
)

// A process's CPU read from /proc is what the kernel counts for it: this test's own, read both
// ways, agrees within the ticks /proc counts in; a process that is gone reads 0.
func TestProcessCPUIsTheKernelsCount(t *testing.T) {
	for start := selfCPU(); selfCPU()-start < 200*time.Millisecond; {
	}
	got, want := processCPU(os.Getpid()), selfCPU()
	if got < 100*time.Millisecond || got > want+20*time.Millisecond || got < want-100*time.Millisecond {
		t.Fatalf("processCPU = %v, getrusage = %v", got, want)
	}
	if processCPU(1<<30) != 0 {
		t.Fatal("a process that is not there has no CPU")
	}
}
