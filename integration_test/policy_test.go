package integration

import (
	"testing"

	"github.com/ratekeeper/ratekeeper/middleware/policy/policytest"
)

// TestPolicyReloadOnRedis runs the policy reload and switch suite against
// real Redis: a reload that raises and cuts a limit keeps clients'
// counters, a renamed limit starts afresh, a failed reload keeps the
// running policies, the file watcher reloads, and the three modes switch.
func TestPolicyReloadOnRedis(t *testing.T) {
	srv := sharedRedis(t)
	c := newClient(t, srv)
	policytest.Run(t, newStore(t, c, randomPrefix(t)))
}
