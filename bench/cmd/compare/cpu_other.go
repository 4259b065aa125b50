//go:build !unix

package main

import "time"

// clientCPUMeasured reports whether processCPU measures anything here: not
// without getrusage, and the client CPU column shows "-".
const clientCPUMeasured = false

// processCPU returns 0: this system has no getrusage.
func processCPU() time.Duration { return 0 }
