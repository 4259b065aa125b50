//go:build !unix

package redistest

import (
	"errors"
	"os"
)

// errNoStopSignal reports a pause or resume where processes cannot be
// stopped and continued by a signal.
var errNoStopSignal = errors.New("redistest: pausing a server needs SIGSTOP and SIGCONT, which this system lacks")

func signalStop(*os.Process) error { return errNoStopSignal }

func signalCont(*os.Process) error { return errNoStopSignal }
