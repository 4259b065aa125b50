package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ratekeeper/ratekeeper/store"
	"github.com/ratekeeper/ratekeeper/store/internal/contract"
	"github.com/ratekeeper/ratekeeper/store/internal/fakeclock"
	"github.com/ratekeeper/ratekeeper/store/memstore"
	"github.com/ratekeeper/ratekeeper/store/storetest"
)

// stackMutantEnv tells TestStackMutant, in a child process, to run the
// stack suite against chainedStore.
const stackMutantEnv = "STORETEST_STACK_MUTANT"

// chainedStore decides a stack the way two chained middlewares do: each
// part in turn, stopping at the first refusal, with no refund.
type chainedStore struct{ store.Store }

func (c chainedStore) TakeMulti(ctx context.Context, reqs []store.Request) (store.MultiDecision, error) {
	if err := contract.ValidateStack(reqs); err != nil {
		return store.MultiDecision{}, err
	}
	md := store.MultiDecision{Parts: make([]store.Decision, len(reqs))}
	refused := false
	for i, r := range reqs {
		var err error
		if refused {
			md.Parts[i], err = c.Peek(ctx, r)
		} else {
			md.Parts[i], err = c.Take(ctx, r)
			refused = !md.Parts[i].Allowed
		}
		if err != nil {
			return store.MultiDecision{}, err
		}
	}
	md.Part = contract.MostRestrictive(md.Parts)
	md.Decision = md.Parts[md.Part]
	md.Allowed = !refused
	return md, nil
}

func TestStackMutant(t *testing.T) {
	if os.Getenv(stackMutantEnv) == "" {
		t.Skip("entry point for the child process of TestStackSuiteCatchesChaining")
	}
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		clk := &fakeclock.Clock{}
		s, err := memstore.New(memstore.Options{Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Harness{Store: chainedStore{s}, Advance: clk.Advance, Exact: true}
	})
}

// TestStackSuiteCatchesChaining proves the stack suite has teeth: a store
// that charges earlier parts for a stack a later part refuses fails it.
func TestStackSuiteCatchesChaining(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a test process; skipped in -short mode")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestStackMutant$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), stackMutantEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("the stack suite passed a store that decides the parts in turn without refunds")
	}
	for _, sub := range []string{"gcra/stack-all-or-nothing", "fixed_window/stack-all-or-nothing", "gcra/stack-block", "gcra/stack-concurrent"} {
		if !strings.Contains(string(out), "--- FAIL: TestStackMutant/"+sub+" ") {
			t.Errorf("got subtest %s passing, want it failing; output:\n%s", sub, tail(string(out), 40))
		}
	}
}
